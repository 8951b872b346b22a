"""Object names per kind, labels and annotations: real apimachinery messages."""
import pytest

from simcluster.errors import ApiError
from simcluster.validation import names

from kit.fake_store import CRD, FakeStore

SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
             "'-' or '.', and must start and end with an alphanumeric character (e.g. "
             "'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
         "and must start and end with an alphanumeric character (e.g. 'my-name',  or "
         "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


def _err(store, resource, obj):
    with pytest.raises(ApiError) as exc:
        store.create(resource, obj)
    return exc.value


def test_configmap_name_must_be_dns_subdomain():
    err = _err(FakeStore(), "configmaps", {"kind": "ConfigMap", "metadata": {
        "name": "Bad_Name", "namespace": "default"}})
    assert err.code == 422
    assert err.message == ('ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: '
                           '"Bad_Name": ' + SUBDOMAIN)
    assert err.details["causes"][0]["field"] == "metadata.name"
    assert err.details["causes"][0]["reason"] == "FieldValueInvalid"


def test_subdomain_allows_dots_but_namespace_label_does_not():
    store = FakeStore()
    store.create("configmaps", {"kind": "ConfigMap", "metadata": {
        "name": "a.b-c", "namespace": "default"}})
    err = _err(store, "namespaces", {"kind": "Namespace", "metadata": {"name": "team.a"}})
    assert err.message == 'Namespace "team.a" is invalid: metadata.name: Invalid value: ' \
                          '"team.a": ' + LABEL


def test_too_long_name_reports_length():
    err = _err(FakeStore(), "namespaces", {"kind": "Namespace", "metadata": {"name": "a" * 64}})
    assert "must be no more than 63 characters" in err.message


def test_service_name_is_dns1035():
    err = _err(FakeStore(), "services", {"kind": "Service", "metadata": {
        "name": "1svc", "namespace": "default"}})
    assert "a DNS-1035 label must consist of lower case alphanumeric characters or '-', " \
           "start with an alphabetic character" in err.message


def test_rbac_names_may_contain_colons():
    store = FakeStore()
    store.create("clusterroles.rbac.authorization.k8s.io", {
        "kind": "ClusterRole", "metadata": {"name": "system:gpu-reader"}})
    err = _err(store, "clusterroles.rbac.authorization.k8s.io", {
        "kind": "ClusterRole", "metadata": {"name": "a/b"}})
    assert err.message.endswith("metadata.name: Invalid value: \"a/b\": may not contain '/'")


def test_name_required():
    err = _err(FakeStore(), "configmaps", {"kind": "ConfigMap",
                                           "metadata": {"namespace": "default"}})
    assert err.message == ('ConfigMap "" is invalid: metadata.name: Required value: '
                           'name or generateName is required')


def test_generate_name_prefix_may_end_with_dash():
    assert names.dns1123_subdomain("gpu-test-", prefix=True) == []
    assert names.dns1123_subdomain("gpu-test-") == [SUBDOMAIN]


def test_cronjob_name_limited_to_52():
    err = _err(FakeStore(), "cronjobs.batch", {"kind": "CronJob", "metadata": {
        "name": "c" * 53, "namespace": "default"}, "spec": {}})
    assert "metadata.name: Invalid value: \"%s\": must be no more than 52 characters" % (
        "c" * 53) in err.message


def test_crd_name_must_be_plural_dot_group():
    err = _err(FakeStore(), CRD, {"kind": "CustomResourceDefinition", "metadata": {
        "name": "queues.wrong.io"}, "spec": {"group": "scheduling.run.ai",
                                              "names": {"plural": "queues", "kind": "Queue"}}})
    assert err.message == ('CustomResourceDefinition.apiextensions.k8s.io "queues.wrong.io" is '
                           'invalid: metadata.name: Invalid value: "queues.wrong.io": '
                           'must be spec.names.plural+"."+spec.group')


def test_label_value_rules():
    err = _err(FakeStore(), "configmaps", {"kind": "ConfigMap", "metadata": {
        "name": "x", "namespace": "default", "labels": {"team": "a b"}}})
    assert err.message.startswith('ConfigMap "x" is invalid: metadata.labels: Invalid value: '
                                  '"a b": a valid label must be an empty string or consist of')


def test_label_key_rules():
    errs = names.validate_labels({"nvidia.com/gpu.deploy.driver": "pre-installed",
                                  "bad key": "x"}, "metadata.labels")
    assert [e.value for e in errs] == ["bad key"]
    assert "name part must consist of alphanumeric characters" in errs[0].detail
