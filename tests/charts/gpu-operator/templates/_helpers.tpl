{{/* Image fields of one operand, as the real chart renders them into ClusterPolicy. */}}
{{- define "gpu-operator.image-fields" -}}
{{- $v := .v -}}
{{- if hasKey $v "enabled" }}
enabled: {{ $v.enabled }}
{{- end }}
{{- if $v.repository }}
repository: {{ $v.repository | quote }}
{{- end }}
{{- if $v.image }}
image: {{ $v.image | quote }}
{{- end }}
{{- $version := $v.version | default .appVersion }}
{{- if $version }}
version: {{ $version | quote }}
{{- end }}
{{- if $v.imagePullPolicy }}
imagePullPolicy: {{ $v.imagePullPolicy }}
{{- end }}
{{- if $v.imagePullSecrets }}
imagePullSecrets: {{ toYaml $v.imagePullSecrets | nindent 2 }}
{{- end }}
{{- if $v.env }}
env: {{ toYaml $v.env | nindent 2 }}
{{- end }}
{{- if $v.args }}
args: {{ toYaml $v.args | nindent 2 }}
{{- end }}
{{- if $v.resources }}
resources: {{ toYaml $v.resources | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "gpu-operator.fullimage" -}}
{{- $v := .v -}}
{{- printf "%s/%s:%s" $v.repository $v.image ($v.version | default .appVersion) -}}
{{- end -}}

{{- define "gpu-operator.labels" -}}
app.kubernetes.io/name: gpu-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
