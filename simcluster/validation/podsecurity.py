"""Pod Security Admission (k8s.io/pod-security-admission) from namespace labels.

Check order, reasons and details are those of pod-security-admission/policy:
baseline checks in registration (file) order, then for `restricted` the
restricted checks; the overlapping baseline checks (capabilities, seccomp) only
for `baseline`. Policy versions only matter for the version-gated checks here.
"""

from simcluster.errors import FieldError

LEVELS = ["privileged", "baseline", "restricted"]
PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")


def _joinq(items):
    return '"' + '", "'.join(items) + '"' if items else ""


def _plural(one, many, n):
    return one if n == 1 else many


def _containers(spec):
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(key) or ():
            if isinstance(c, dict):
                yield c


def _sc(c):
    return c.get("securityContext") or {}


def _ccount(names):
    return "%s %s" % (_plural("container", "containers", len(names)), _joinq(names))


# -- baseline ----------------------------------------------------------------

def check_apparmor(meta, spec):
    bad = []
    def ok(p):
        return not p or p.get("type") in (None, "RuntimeDefault", "Localhost")
    if not ok((spec.get("securityContext") or {}).get("appArmorProfile")):
        bad.append("pod")
    for c in _containers(spec):
        if not ok(_sc(c).get("appArmorProfile")):
            bad.append('container "%s"' % c.get("name"))
    for k, v in ((meta or {}).get("annotations") or {}).items():
        if k.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
                v in ("runtime/default",) or v.startswith("localhost/")):
            bad.append("%s=%s" % (k, v))
    if bad:
        return "forbidden AppArmor profile", ", ".join(bad) + ' must not set AppArmor profile ' \
            'type to "Unconfined"'
    return None


def check_host_namespaces(meta, spec):
    bad = [k + "=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    if bad:
        return "host namespaces", ", ".join(bad)
    return None


def check_host_path(meta, spec):
    vols = [v.get("name") for v in spec.get("volumes") or () if (v or {}).get("hostPath")]
    if vols:
        return "hostPath volumes", "%s %s" % (_plural("volume", "volumes", len(vols)),
                                              _joinq(vols))
    return None


def check_host_ports(meta, spec):
    bad, ports = [], set()
    for c in _containers(spec):
        found = [p.get("hostPort") for p in c.get("ports") or () if (p or {}).get("hostPort")]
        if found:
            bad.append(c.get("name"))
            ports.update(str(p) for p in found)
    if bad:
        plist = sorted(ports)
        return "hostPort", "%s %s %s %s %s" % (
            _plural("container", "containers", len(bad)), _joinq(bad),
            _plural("uses", "use", len(bad)), _plural("hostPort", "hostPorts", len(plist)),
            ", ".join(plist))
    return None


def check_host_probes(meta, spec, version):
    if version is not None and version < (1, 34):
        return None
    bad, hosts = set(), set()
    for c in _containers(spec):
        handlers = [c.get(p) for p in ("livenessProbe", "readinessProbe", "startupProbe")]
        lc = c.get("lifecycle") or {}
        handlers += [lc.get("postStart"), lc.get("preStop")]
        for h in handlers:
            for kind in ("httpGet", "tcpSocket"):
                host = ((h or {}).get(kind) or {}).get("host")
                if host:
                    bad.add(c.get("name"))
                    hosts.add(host)
    if bad:
        return "probe or lifecycle host", "%s %s %s %s %s" % (
            _plural("container", "containers", len(bad)), _joinq(sorted(bad)),
            _plural("uses", "use", len(bad)),
            _plural("probe or lifecycle host", "probe or lifecycle hosts", len(hosts)),
            _joinq(sorted(hosts)))
    return None


def check_privileged(meta, spec):
    bad = [c.get("name") for c in _containers(spec) if _sc(c).get("privileged") is True]
    if bad:
        return "privileged", "%s must not set securityContext.privileged=true" % _ccount(bad)
    return None


def check_proc_mount(meta, spec):
    bad, types = [], set()
    for c in _containers(spec):
        pm = _sc(c).get("procMount")
        if pm not in (None, "", "Default"):
            bad.append(c.get("name"))
            types.add(pm)
    if bad:
        return "procMount", "%s must not set securityContext.procMount to %s" % (
            _ccount(bad), _joinq(sorted(types)))
    return None


_SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}


def check_selinux(meta, spec):
    setters, bad_types, bad_user, bad_role = [], set(), False, False
    def visit(opts):
        nonlocal bad_user, bad_role
        if not opts:
            return False
        bad = False
        if opts.get("type", "") not in _SELINUX_TYPES:
            bad_types.add(opts["type"])
            bad = True
        if opts.get("user"):
            bad_user = bad = True
        if opts.get("role"):
            bad_role = bad = True
        return bad
    if visit((spec.get("securityContext") or {}).get("seLinuxOptions")):
        setters.append("pod")
    bad_c = [c.get("name") for c in _containers(spec) if visit(_sc(c).get("seLinuxOptions"))]
    if bad_c:
        setters.append(_ccount(bad_c))
    if setters:
        parts = []
        if bad_types:
            parts.append("%s %s" % (_plural("type", "types", len(bad_types)),
                                    _joinq(sorted(bad_types))))
        if bad_user:
            parts.append("user may not be set")
        if bad_role:
            parts.append("role may not be set")
        return "seLinuxOptions", "%s set forbidden securityContext.seLinuxOptions: %s" % (
            " and ".join(setters), "; ".join(parts))
    return None


_SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced": (1, 0), "net.ipv4.ip_local_port_range": (1, 0),
    "net.ipv4.tcp_syncookies": (1, 0), "net.ipv4.ping_group_range": (1, 0),
    "net.ipv4.ip_unprivileged_port_start": (1, 0), "net.ipv4.ip_local_reserved_ports": (1, 27),
    "net.ipv4.tcp_keepalive_time": (1, 29), "net.ipv4.tcp_fin_timeout": (1, 29),
    "net.ipv4.tcp_keepalive_intvl": (1, 29), "net.ipv4.tcp_keepalive_probes": (1, 29),
    "net.ipv4.tcp_rmem": (1, 32), "net.ipv4.tcp_wmem": (1, 32),
}


def check_sysctls(meta, spec, version):
    bad = []
    for s in (spec.get("securityContext") or {}).get("sysctls") or ():
        since = _SAFE_SYSCTLS.get((s or {}).get("name"))
        if since is None or (version is not None and version < since):
            bad.append((s or {}).get("name"))
    if bad:
        return "forbidden sysctls", ", ".join(bad)
    return None


def check_windows_host_process(meta, spec):
    setters = []
    if ((spec.get("securityContext") or {}).get("windowsOptions") or {}).get("hostProcess"):
        setters.append("pod")
    bad = [c.get("name") for c in _containers(spec)
           if (_sc(c).get("windowsOptions") or {}).get("hostProcess")]
    if bad:
        setters.append(_ccount(bad))
    if setters:
        return "hostProcess", "%s must not set securityContext.windowsOptions.hostProcess=true" % (
            " and ".join(setters))
    return None


_ALLOWED_CAPS = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                 "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}


def check_capabilities_baseline(meta, spec):
    bad, caps = [], set()
    for c in _containers(spec):
        added = [x for x in (_sc(c).get("capabilities") or {}).get("add") or ()
                 if x not in _ALLOWED_CAPS]
        if added:
            bad.append(c.get("name"))
            caps.update(added)
    if bad:
        return "non-default capabilities", "%s must not include %s in " \
            "securityContext.capabilities.add" % (_ccount(bad), _joinq(sorted(caps)))
    return None


def _seccomp_valid(t):
    return t in ("RuntimeDefault", "Localhost")


def check_seccomp_baseline(meta, spec):
    setters, values = [], set()
    prof = (spec.get("securityContext") or {}).get("seccompProfile")
    if prof and not _seccomp_valid(prof.get("type")):
        setters.append("pod")
        values.add(prof.get("type"))
    bad = []
    for c in _containers(spec):
        p = _sc(c).get("seccompProfile")
        if p and not _seccomp_valid(p.get("type")):
            bad.append(c.get("name"))
            values.add(p.get("type"))
    if bad:
        setters.append(_ccount(bad))
    if setters:
        return "seccompProfile", "%s must not set securityContext.seccompProfile.type to %s" % (
            " and ".join(setters), _joinq(sorted(values)))
    return None


# -- restricted ----------------------------------------------------------------

def check_allow_privilege_escalation(meta, spec):
    bad = [c.get("name") for c in _containers(spec)
           if _sc(c).get("allowPrivilegeEscalation") is not False]
    if bad:
        return "allowPrivilegeEscalation != false", \
            "%s must set securityContext.allowPrivilegeEscalation=false" % _ccount(bad)
    return None


def check_capabilities_restricted(meta, spec):
    missing, adding, caps = [], [], set()
    for c in _containers(spec):
        capset = _sc(c).get("capabilities")
        if not capset:
            missing.append(c.get("name"))
            continue
        if "ALL" not in (capset.get("drop") or ()):
            missing.append(c.get("name"))
        extra = [x for x in capset.get("add") or () if x != "NET_BIND_SERVICE"]
        if extra:
            adding.append(c.get("name"))
            caps.update(extra)
    details = []
    if missing:
        details.append('%s must set securityContext.capabilities.drop=["ALL"]' % _ccount(missing))
    if adding:
        details.append("%s must not include %s in securityContext.capabilities.add"
                       % (_ccount(adding), _joinq(sorted(caps))))
    if details:
        return "unrestricted capabilities", "; ".join(details)
    return None


_RESTRICTED_OK_VOLUMES = ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                          "persistentVolumeClaim", "projected", "secret")
_VOLUME_TYPES = ("hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs",
                 "iscsi", "glusterfs", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "fc",
                 "azureFile", "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk",
                 "portworxVolume", "scaleIO", "storageos")


def check_restricted_volumes(meta, spec):
    bad, types = [], set()
    for v in spec.get("volumes") or ():
        v = v or {}
        if any(v.get(k) is not None for k in _RESTRICTED_OK_VOLUMES):
            continue
        bad.append(v.get("name"))
        types.add(next((t for t in _VOLUME_TYPES if v.get(t) is not None), "unknown"))
    if bad:
        return "restricted volume types", "%s %s %s %s %s" % (
            _plural("volume", "volumes", len(bad)), _joinq(bad), _plural("uses", "use", len(bad)),
            _plural("restricted volume type", "restricted volume types", len(types)),
            _joinq(sorted(types)))
    return None


def check_run_as_non_root(meta, spec):
    setters = []
    pod_ok = False
    psc = spec.get("securityContext") or {}
    if psc.get("runAsNonRoot") is not None:
        if psc["runAsNonRoot"] is False:
            setters.append("pod")
        else:
            pod_ok = True
    explicit, implicit = [], []
    for c in _containers(spec):
        v = _sc(c).get("runAsNonRoot")
        if v is not None:
            if v is False:
                explicit.append(c.get("name"))
        elif not pod_ok:
            implicit.append(c.get("name"))
    if explicit:
        setters.append(_ccount(explicit))
    if setters:
        return "runAsNonRoot != true", "%s must not set securityContext.runAsNonRoot=false" % (
            " and ".join(setters))
    if implicit:
        return "runAsNonRoot != true", "pod or %s must set securityContext.runAsNonRoot=true" % (
            _ccount(implicit))
    return None


def check_run_as_user(meta, spec):
    setters = []
    if (spec.get("securityContext") or {}).get("runAsUser") == 0:
        setters.append("pod")
    bad = [c.get("name") for c in _containers(spec) if _sc(c).get("runAsUser") == 0]
    if bad:
        setters.append(_ccount(bad))
    if setters:
        return "runAsUser=0", "%s must not set runAsUser=0" % " and ".join(setters)
    return None


def check_seccomp_restricted(meta, spec):
    setters, values = [], set()
    pod_set = False
    prof = (spec.get("securityContext") or {}).get("seccompProfile")
    if prof:
        if not _seccomp_valid(prof.get("type")):
            setters.append("pod")
            values.add(prof.get("type"))
        else:
            pod_set = True
    explicit, implicit = [], []
    for c in _containers(spec):
        p = _sc(c).get("seccompProfile")
        if p:
            if not _seccomp_valid(p.get("type")):
                explicit.append(c.get("name"))
                values.add(p.get("type"))
        elif not pod_set:
            implicit.append(c.get("name"))
    if explicit:
        setters.append(_ccount(explicit))
    if setters:
        return "seccompProfile", "%s must not set securityContext.seccompProfile.type to %s" % (
            " and ".join(setters), _joinq(sorted(values)))
    if implicit:
        return "seccompProfile", 'pod or %s must set securityContext.seccompProfile.type to ' \
            '"RuntimeDefault" or "Localhost"' % _ccount(implicit)
    return None


_VERSIONED = {check_host_probes, check_sysctls}
BASELINE = [check_apparmor, check_host_namespaces, check_host_path, check_host_ports,
            check_host_probes, check_privileged, check_proc_mount, check_selinux,
            check_sysctls, check_windows_host_process]
BASELINE_OVERLAP = [check_capabilities_baseline, check_seccomp_baseline]
RESTRICTED = [check_allow_privilege_escalation, check_capabilities_restricted,
              check_restricted_volumes, check_run_as_non_root, check_run_as_user,
              check_seccomp_restricted]


# -- policy ----------------------------------------------------------------------

class LevelVersion:
    __slots__ = ("level", "version")

    def __init__(self, level, version):
        self.level = level
        self.version = version  # None = latest, else (1, minor)

    def __str__(self):
        v = "latest" if self.version is None else "v%d.%d" % self.version
        return "%s:%s" % (self.level, v)

    def __eq__(self, other):
        return (self.level, self.version) == (other.level, other.version)


def parse_version(text):
    if text == "latest":
        return None
    if isinstance(text, str) and text.startswith("v1.") and text[3:].isdigit():
        return (1, int(text[3:]))
    raise ValueError("must be 'latest' or 'v1.x'")


def policy_from_labels(labels):
    """({mode: LevelVersion}, [FieldError]) like api.PolicyToEvaluate (default privileged)."""
    labels = labels or {}
    policy, errs = {}, []
    for mode in MODES:
        level, version = "privileged", None
        lkey, vkey = PREFIX + mode, PREFIX + mode + "-version"
        if lkey in labels:
            if labels[lkey] in LEVELS:
                level = labels[lkey]
            else:
                errs.append(FieldError("Invalid value", "metadata.labels[%s]" % lkey, labels[lkey],
                                       "must be one of %s" % ", ".join(LEVELS)))
        if vkey in labels:
            try:
                version = parse_version(labels[vkey])
            except ValueError as exc:
                errs.append(FieldError("Invalid value", "metadata.labels[%s]" % vkey,
                                       labels[vkey], str(exc)))
        policy[mode] = LevelVersion(level, version)
    return policy, errs


def evaluate(lv, meta, spec):
    """[(reason, detail)] of the failed checks for that level (empty = allowed)."""
    if lv.level == "privileged" or not isinstance(spec, dict):
        return []
    checks = list(BASELINE)
    checks += BASELINE_OVERLAP if lv.level == "baseline" else RESTRICTED
    out = []
    for check in checks:
        res = check(meta, spec, lv.version) if check in _VERSIONED else check(meta, spec)
        if res:
            out.append(res)
    return out


def detail(results):
    return ", ".join("%s (%s)" % (r, d) if d else r for r, d in results)


def reasons(results):
    return ", ".join(r for r, _ in results)
