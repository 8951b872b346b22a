"""Pod Security Admission from namespace labels, with the real messages."""
import pytest

from simcluster.errors import ApiError
from simcluster.validation import podsecurity

from kit.fake_store import FakeStore, pod

ENFORCE = "pod-security.kubernetes.io/enforce"
RESTRICTED_POD_SC = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_C_SC = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def labelled(level, mode="enforce", version=None):
    labels = {"pod-security.kubernetes.io/" + mode: level}
    if version:
        labels["pod-security.kubernetes.io/%s-version" % mode] = version
    store = FakeStore()
    store.create("namespaces", {"kind": "Namespace", "metadata": {"name": "team",
                                                                  "labels": labels}})
    return store


def privileged_pod(name="x"):
    return pod(name, "team", containers=[{"name": "c", "image": "i",
                                          "securityContext": {"privileged": True}}])


def test_privileged_pod_refused_in_restricted_namespace():
    with pytest.raises(ApiError) as exc:
        labelled("restricted").create("pods", privileged_pod())
    err = exc.value
    assert (err.code, err.reason) == (403, "Forbidden")
    assert err.message == (
        'pods "x" is forbidden: violates PodSecurity "restricted:latest": privileged (container '
        '"c" must not set securityContext.privileged=true), allowPrivilegeEscalation != false '
        '(container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted '
        'capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), '
        'runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), '
        'seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to '
        '"RuntimeDefault" or "Localhost")')


def test_restricted_compliant_pod_is_admitted():
    p = pod("ok", "team", securityContext=RESTRICTED_POD_SC,
            containers=[{"name": "c", "image": "i", "securityContext": RESTRICTED_C_SC}])
    labelled("restricted").create("pods", p)


def test_baseline_blocks_host_namespaces_and_paths_but_not_root():
    p = pod("x", "team", hostNetwork=True, hostPID=True,
            volumes=[{"name": "dev", "hostPath": {"path": "/dev"}}],
            containers=[{"name": "c", "image": "i", "ports": [{"containerPort": 80,
                                                               "hostPort": 80}]}])
    with pytest.raises(ApiError) as exc:
        labelled("baseline", version="v1.30").create("pods", p)
    assert exc.value.message == (
        'pods "x" is forbidden: violates PodSecurity "baseline:v1.30": host namespaces '
        '(hostNetwork=true, hostPID=true), hostPath volumes (volume "dev"), hostPort '
        '(container "c" uses hostPort 80)')
    labelled("baseline").create("pods", pod("root", "team"))


def test_baseline_capabilities_overlap_check_only_at_baseline():
    p = pod("x", "team", containers=[{"name": "a", "image": "i", "securityContext": {
        "capabilities": {"add": ["SYS_ADMIN", "NET_ADMIN", "CHOWN"]}}}])
    with pytest.raises(ApiError) as exc:
        labelled("baseline").create("pods", p)
    assert exc.value.message.endswith(
        'non-default capabilities (container "a" must not include "NET_ADMIN", "SYS_ADMIN" in '
        'securityContext.capabilities.add)')


def test_privileged_level_allows_everything():
    labelled("privileged").create("pods", privileged_pod())
    FakeStore(namespaces=("team",)).create("pods", privileged_pod())  # no labels at all


def test_warn_mode_returns_warnings_for_pods():
    _, warnings = labelled("restricted", mode="warn").create_w("pods", privileged_pod())
    assert len(warnings) == 1
    assert warnings[0].startswith('would violate PodSecurity "restricted:latest": privileged '
                                  '(container "c" must not set securityContext.privileged=true)')


def test_enforce_does_not_refuse_workloads_but_warns():
    d = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d",
                                                                     "namespace": "team"},
         "spec": {"selector": {"matchLabels": {"a": "b"}},
                  "template": {"metadata": {"labels": {"a": "b"}},
                               "spec": {"hostNetwork": True,
                                        "containers": [{"name": "c", "image": "i"}]}}}}
    _, warnings = labelled("baseline").create_w("deployments.apps", d)
    assert warnings == ['would violate PodSecurity "baseline:latest": host namespaces '
                        '(hostNetwork=true)']


def test_cronjob_template_path():
    cj = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj",
                                                                    "namespace": "team"},
          "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
              "restartPolicy": "Never",
              "containers": [{"name": "c", "image": "i",
                              "securityContext": {"privileged": True}}]}}}}}}
    _, warnings = labelled("baseline").create_w("cronjobs.batch", cj)
    assert warnings == ['would violate PodSecurity "baseline:latest": privileged (container "c" '
                        'must not set securityContext.privileged=true)']


def test_enforce_and_distinct_warn_level():
    store = FakeStore()
    store.create("namespaces", {"kind": "Namespace", "metadata": {"name": "team", "labels": {
        ENFORCE: "baseline", "pod-security.kubernetes.io/warn": "restricted"}}})
    _, warnings = store.create_w("pods", pod("root", "team"))
    assert warnings == [
        'would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false '
        '(container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted '
        'capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), '
        'runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), '
        'seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to '
        '"RuntimeDefault" or "Localhost")']


def test_namespace_label_values_validated():
    store = FakeStore()
    with pytest.raises(ApiError) as exc:
        store.create("namespaces", {"kind": "Namespace", "metadata": {
            "name": "team", "labels": {ENFORCE: "strict"}}})
    assert exc.value.code == 422
    assert exc.value.message == (
        'namespaces "team" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: '
        'Invalid value: "strict": must be one of privileged, baseline, restricted')


def test_tightening_namespace_warns_about_existing_pods():
    store = FakeStore(namespaces=("team",))
    store.create("pods", privileged_pod("p1"))
    store.create("pods", privileged_pod("p2"))
    ns = store.get("namespaces", None, "team")
    ns["metadata"]["labels"] = {ENFORCE: "baseline"}
    _, warnings = store.update_w("namespaces", ns)
    assert warnings == ['existing pods in namespace "team" violate the new PodSecurity enforce '
                        'level "baseline:latest"', "p1 (and 1 other pod): privileged"]


def test_pod_update_of_image_only_is_not_re_evaluated():
    store = FakeStore(namespaces=("team",))
    store.create("pods", privileged_pod())
    ns = store.get("namespaces", None, "team")
    ns["metadata"]["labels"] = {ENFORCE: "baseline"}
    store.update("namespaces", ns)
    p = store.get("pods", "team", "x")
    p["spec"]["containers"][0]["image"] = "i:2"
    store.update("pods", p)
    p["spec"]["activeDeadlineSeconds"] = 5
    with pytest.raises(ApiError):
        store.update("pods", p)


@pytest.mark.parametrize("spec,reason", [
    ({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}},
     "forbidden sysctls (kernel.msgmax)"),
    ({"securityContext": {"seccompProfile": {"type": "Unconfined"}}},
     'seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")'),
    ({"containers": [{"name": "c", "image": "i", "securityContext": {"procMount": "Unmasked"}}]},
     'procMount (container "c" must not set securityContext.procMount to "Unmasked")'),
    ({"containers": [{"name": "c", "image": "i", "livenessProbe": {
        "httpGet": {"host": "10.0.0.1", "port": 80}}}]},
     'probe or lifecycle host (container "c" uses probe or lifecycle host "10.0.0.1")'),
])
def test_more_baseline_checks(spec, reason):
    full = {"containers": [{"name": "c", "image": "i"}]}
    full.update(spec)
    lv = podsecurity.LevelVersion("baseline", None)
    assert podsecurity.detail(podsecurity.evaluate(lv, {}, full)) == reason


def test_restricted_volume_types_and_run_as_user():
    spec = {"securityContext": dict(RESTRICTED_POD_SC, runAsUser=0),
            "volumes": [{"name": "n", "nfs": {"server": "s", "path": "/"}},
                        {"name": "cm", "configMap": {"name": "x"}}],
            "containers": [{"name": "c", "image": "i", "securityContext": RESTRICTED_C_SC}]}
    lv = podsecurity.LevelVersion("restricted", None)
    assert podsecurity.detail(podsecurity.evaluate(lv, {}, spec)) == (
        'restricted volume types (volume "n" uses restricted volume type "nfs"), '
        'runAsUser=0 (pod must not set runAsUser=0)')
