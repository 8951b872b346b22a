"""NetworkPolicy evaluator against the cases of the Kubernetes e2e suite.

Model of test/e2e/network/netpol (kubemanager.go, model.go): namespaces x, y, z labelled
kubernetes.io/metadata.name, pods a, b, c labelled pod=<name>, each serving TCP and UDP
on 80 and 81 with container ports named serve-<port>-<proto>. A case builds the policies
of the upstream test and compares the whole truth table (loopback ignored, as upstream).
Each test's docstring is the upstream `f.It(...)` title.
"""

import pytest

from simcluster.netpol import Network, Peer, probe_args

NS_KEY = "kubernetes.io/metadata.name"
NAMESPACES = ("x", "y", "z")
PODS = ("a", "b", "c")


def pod(ns, name, ip):
    ports = [{"name": "serve-%d-%s" % (p, proto.lower()), "containerPort": p, "protocol": proto}
             for p in (80, 81) for proto in ("TCP", "UDP")]
    return {"metadata": {"namespace": ns, "name": name, "labels": {"pod": name}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                                     "ports": ports}]},
            "status": {"phase": "Running", "podIP": ip,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def cluster(pods=None):
    pods = pods or [(ns, p) for ns in NAMESPACES for p in PODS]
    objs = [pod(ns, p, "10.244.%d.%d" % (NAMESPACES.index(ns) + 1, PODS.index(p) + 10)) for ns, p in pods]
    namespaces = [{"metadata": {"name": ns, "labels": {NS_KEY: ns}}} for ns in NAMESPACES]
    return objs, namespaces


def policy(name, ns, pod_selector, ingress=None, egress=None, types=None):
    spec = {"podSelector": pod_selector}
    if ingress is not None:
        spec["ingress"] = ingress
    if egress is not None:
        spec["egress"] = egress
    if types is not None:
        spec["policyTypes"] = types
    return {"metadata": {"namespace": ns, "name": name}, "spec": spec}


def deny_ingress(ns):
    return policy("deny-ingress", ns, {}, ingress=[], types=["Ingress"])


def deny_all(ns):
    return policy("deny-all", ns, {}, ingress=[], egress=[], types=["Ingress", "Egress"])


def only_a(name, ns="x", **kw):
    return policy(name, ns, {"matchLabels": {"pod": "a"}}, **kw)


def table(policies, port=80, protocol="TCP", pods=None):
    objs, namespaces = cluster(pods)
    net = Network(objs, [], namespaces, policies)
    peers = dict(("%s/%s" % (p["metadata"]["namespace"], p["metadata"]["name"]), net.peer_of_pod(p)) for p in objs)
    return dict(((s, d), net.allowed(peers[s], peers[d], port, protocol))
                for s in peers for d in peers if s != d)


def expect(default=True, pods=None, **rules):
    """Reachability: default for every pair, then overrides src->dst (callables on names)."""
    names = ["%s/%s" % pair for pair in (pods or [(ns, p) for ns in NAMESPACES for p in PODS])]
    result = {}
    for s in names:
        for d in names:
            if s != d:
                result[(s, d)] = default
    return result


def override(reach, fn, value):
    for key in reach:
        if fn(*key):
            reach[key] = value
    return reach


def ns_of(name):
    return name.split("/")[0]


def test_default_deny_ingress():
    """should support a 'default-deny-ingress' policy"""
    reach = override(expect(), lambda s, d: ns_of(d) == "x", False)
    assert table([deny_ingress("x")]) == reach


def test_default_deny_all():
    """should support a 'default-deny-all' policy"""
    reach = override(expect(), lambda s, d: "x" in (ns_of(s), ns_of(d)), False)
    assert table([deny_all("x")]) == reach


def test_pod_selector_same_namespace():
    """should enforce policy to allow traffic from pods within server namespace based on PodSelector"""
    pol = only_a("x-a-allows-x-b", ingress=[{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}]}])
    reach = override(expect(), lambda s, d: d == "x/a" and s != "x/b", False)
    assert table([pol]) == reach


def test_allow_ingress_for_a_target():
    """should enforce policy to allow ingress traffic for a target"""
    allow = only_a("allow-all-to-a", ingress=[{"from": [{"podSelector": {}, "namespaceSelector": {}}]}])
    reach = override(expect(), lambda s, d: ns_of(d) == "x" and d != "x/a", False)
    assert table([deny_ingress("x"), allow]) == reach


def test_ingress_from_all_namespaces():
    """should enforce policy to allow ingress traffic from pods in all namespaces"""
    pol = only_a("allow-from-another-ns", ingress=[{"from": [{"namespaceSelector": {"matchLabels": {}}}]}])
    assert table([pol]) == expect()


def test_namespace_selector():
    """should enforce policy to allow traffic only from a different namespace, based on NamespaceSelector"""
    pol = only_a("allow-client-a-via-ns-selector",
                 ingress=[{"from": [{"namespaceSelector": {"matchLabels": {NS_KEY: "y"}}}]}])
    reach = override(expect(), lambda s, d: d == "x/a" and ns_of(s) in ("x", "z"), False)
    assert table([pol]) == reach


def test_pod_selector_match_expressions():
    """should enforce policy based on PodSelector with MatchExpressions"""
    sel = {"matchExpressions": [{"key": "pod", "operator": "In", "values": ["b"]}]}
    pol = only_a("x-a-allows-x-b", ingress=[{"from": [{"podSelector": sel}]}])
    reach = override(expect(), lambda s, d: d == "x/a" and s != "x/b", False)
    assert table([pol]) == reach


def test_namespace_selector_match_expressions():
    """should enforce policy based on NamespaceSelector with MatchExpressions"""
    sel = {"matchExpressions": [{"key": NS_KEY, "operator": "In", "values": ["y"]}]}
    pol = only_a("allow-ns-y-match-selector", ingress=[{"from": [{"namespaceSelector": sel}]}])
    reach = override(expect(), lambda s, d: d == "x/a" and ns_of(s) != "y", False)
    assert table([pol]) == reach


def test_pod_selector_or_namespace_selector():
    """should enforce policy based on PodSelector or NamespaceSelector"""
    not_x = {"matchExpressions": [{"key": NS_KEY, "operator": "NotIn", "values": ["x"]}]}
    pol = only_a("allow-ns-y-match-selector", ingress=[{"from": [
        {"namespaceSelector": not_x}, {"podSelector": {"matchLabels": {"pod": "b"}}}]}])
    reach = override(expect(), lambda s, d: d == "x/a" and s == "x/c", False)
    assert table([pol]) == reach


def test_pod_selector_and_namespace_selector():
    """should enforce policy based on PodSelector and NamespaceSelector"""
    not_x = {"matchExpressions": [{"key": NS_KEY, "operator": "NotIn", "values": ["x"]}]}
    pol = only_a("allow-ns-y-podselector-and-nsselector", ingress=[{"from": [
        {"namespaceSelector": not_x, "podSelector": {"matchLabels": {"pod": "b"}}}]}])
    reach = override(expect(), lambda s, d: d == "x/a" and s not in ("y/b", "z/b"), False)
    assert table([pol]) == reach


def test_multiple_pod_and_namespace_selectors():
    """should enforce policy based on Multiple PodSelectors and NamespaceSelectors"""
    not_x = {"matchExpressions": [{"key": NS_KEY, "operator": "NotIn", "values": ["x"]}]}
    pods_bc = {"matchExpressions": [{"key": "pod", "operator": "In", "values": ["b", "c"]}]}
    pol = only_a("allow-ns-y-z-pod-b-c", ingress=[{"from": [{"namespaceSelector": not_x, "podSelector": pods_bc}]}])
    reach = override(expect(), lambda s, d: d == "x/a" and (ns_of(s) == "x" or s.endswith("/a")), False)
    assert table([pol]) == reach


def test_ports():
    """should enforce policy based on Ports"""
    pol = only_a("allow-client-a-via-ns-selector", ingress=[{
        "from": [{"namespaceSelector": {"matchLabels": {NS_KEY: "y"}}}],
        "ports": [{"port": 81, "protocol": "TCP"}]}])
    reach81 = override(expect(), lambda s, d: d == "x/a" and ns_of(s) != "y", False)
    assert table([pol], port=81) == reach81
    reach80 = override(expect(), lambda s, d: d == "x/a", False)
    assert table([pol], port=80) == reach80


def test_stacked_policies():
    """should enforce multiple, stacked policies with overlapping podSelectors"""
    rule = {"from": [{"namespaceSelector": {"matchLabels": {NS_KEY: "y"}}}]}
    p81 = only_a("allow-81", ingress=[dict(rule, ports=[{"port": 81, "protocol": "TCP"}])])
    p80 = only_a("allow-80", ingress=[dict(rule, ports=[{"port": 80, "protocol": "TCP"}])])
    allow = override(expect(), lambda s, d: d == "x/a" and ns_of(s) != "y", False)
    assert table([p81], port=80) == override(expect(), lambda s, d: d == "x/a", False)
    assert table([p81, p80], port=80) == allow


def test_allow_all():
    """should support allow-all policy"""
    pol = policy("allow-all", "x", {}, ingress=[{}])
    assert table([pol], port=80) == expect()
    assert table([pol], port=81) == expect()


def test_named_port_ingress():
    """should allow ingress access on one named port"""
    pol = policy("allow-all", "x", {}, ingress=[{"ports": [{"port": "serve-81-tcp"}]}])
    assert table([pol], port=81) == expect()
    assert table([pol], port=80) == override(expect(), lambda s, d: ns_of(d) == "x", False)


def test_named_port_egress():
    """should allow egress access on one named port"""
    pods = [("x", "a"), ("y", "a")]
    pol = policy("allow-egress", "x", {}, egress=[{"ports": [{"port": "serve-80-tcp"}]}], types=["Egress"])
    assert table([pol], port=80, pods=pods) == expect(pods=pods)
    assert table([pol], port=81, pods=pods) == override(expect(pods=pods), lambda s, d: ns_of(s) == "x", False)


def test_protocol_udp_not_tcp():
    """should enforce ingress policy allowing any port traffic to a server on a specific protocol"""
    pol = only_a("allow-ingress-by-proto", ingress=[{"ports": [{"protocol": "TCP"}]}])
    assert table([pol], protocol="TCP") == expect()
    assert table([pol], protocol="UDP") == override(expect(), lambda s, d: d == "x/a", False)


def test_ingress_allow_all_precedence():
    """should enforce multiple ingress policies with ingress allow-all policy taking precedence"""
    pods = [("x", "a"), ("y", "a")]
    only80 = policy("allow-ingress-port-80", "x", {}, ingress=[{"ports": [{"port": 80}]}])
    assert table([only80], port=81, pods=pods) == override(expect(pods=pods), lambda s, d: ns_of(d) == "x", False)
    assert table([only80, policy("allow-ingress", "x", {}, ingress=[{}])], port=81, pods=pods) == expect(pods=pods)


def test_egress_allow_all_precedence():
    """should enforce multiple egress policies with egress allow-all policy taking precedence"""
    pods = [("x", "a"), ("y", "a")]
    only80 = policy("allow-egress-port-80", "x", {}, egress=[{"ports": [{"port": 80}]}], types=["Egress"])
    assert table([only80], port=81, pods=pods) == override(expect(pods=pods), lambda s, d: ns_of(s) == "x", False)
    allow = policy("allow-egress", "x", {}, egress=[{}], types=["Egress"])
    assert table([only80, allow], port=81, pods=pods) == expect(pods=pods)


def test_deleted_policies():
    """should stop enforcing policies after they are deleted"""
    pods = [("x", "a"), ("y", "a")]
    assert table([deny_all("x")], pods=pods) == expect(False, pods=pods)
    assert table([], pods=pods) == expect(pods=pods)


def test_egress_cidr():
    """should allow egress access to server in CIDR block"""
    pods = [("x", "a"), ("y", "a"), ("y", "b")]
    pol = only_a("allow-client-a-via-cidr-egress-rule", egress=[{"to": [{"ipBlock": {"cidr": "10.244.2.11/32"}}]}],
                 types=["Egress"])
    reach = override(expect(pods=pods), lambda s, d: s == "x/a" and d != "y/b", False)
    assert table([pol], pods=pods) == reach


def test_egress_cidr_except():
    """should enforce except clause while egress access to server in CIDR block"""
    pods = [("x", "a"), ("x", "b"), ("x", "c")]
    pol = only_a("allow-client-a-via-cidr-egress-rule", types=["Egress"], egress=[
        {"to": [{"ipBlock": {"cidr": "10.244.0.0/16", "except": ["10.244.1.11/32"]}}]}])
    reach = override(expect(pods=pods), lambda s, d: (s, d) == ("x/a", "x/b"), False)
    assert table([pol], pods=pods) == reach


def test_cidr_and_except_overlap():
    """should ensure an IP overlapping both IPBlock.CIDR and IPBlock.Except is allowed"""
    pods = [("x", "a"), ("x", "b"), ("x", "c")]
    first = only_a("allow-client-a-via-cidr-egress-rule", types=["Egress"], egress=[
        {"to": [{"ipBlock": {"cidr": "10.244.0.0/16", "except": ["10.244.1.11/32"]}}]}])
    second = only_a("allow-b", types=["Egress"], egress=[{"to": [{"ipBlock": {"cidr": "10.244.1.11/32"}}]}])
    assert table([first, second], pods=pods) == expect(pods=pods)


def test_ingress_egress_independent():
    """should enforce policies to check ingress and egress policies can be controlled independently based on
    PodSelector"""
    pods = [("x", "a"), ("x", "b"), ("y", "a")]
    egress = only_a("allow-egress-for-target", egress=[{}], types=["Egress"])
    assert table([egress], pods=pods) == expect(pods=pods)
    deny = only_a("deny-ingress-via-label-selector", ingress=[], types=["Ingress"])
    assert table([egress, deny], pods=pods) == override(expect(pods=pods), lambda s, d: d == "x/a", False)


def test_sctp_not_tcp():
    """should not mistakenly treat 'protocol: SCTP' as 'protocol: TCP', even if the plugin doesn't support SCTP"""
    pods = [("x", "a"), ("y", "a")]
    sctp = only_a("allow-only-sctp-ingress-on-port-81", ingress=[{"ports": [{"port": 81, "protocol": "SCTP"}]}])
    reach = override(expect(pods=pods), lambda s, d: ns_of(d) == "x", False)
    assert table([deny_ingress("x"), sctp], port=81, pods=pods) == reach


def test_end_port():
    """should support egress policy with endPort (port range 80-81 allowed, 82 denied)"""
    pods = [("x", "a"), ("y", "a")]
    pol = only_a("allow-range", types=["Egress"], egress=[{"ports": [{"port": 80, "endPort": 81, "protocol": "TCP"}]}])
    assert table([pol], port=81, pods=pods) == expect(pods=pods)
    assert table([pol], port=82, pods=pods) == override(expect(pods=pods), lambda s, d: s == "x/a", False)


def test_deny_egress_on_client_side():
    """should support denying of egress traffic on the client side (even if the server explicitly allows this
    traffic)"""
    pods = [("x", "a"), ("y", "a"), ("z", "a")]
    egress = only_a("allow-to-ns-y-pod-a", types=["Egress"], egress=[{"to": [
        {"namespaceSelector": {"matchLabels": {NS_KEY: "y"}}, "podSelector": {"matchLabels": {"pod": "a"}}}]}])
    ingress_y = policy("allow-from-xa-on-ya", "y", {"matchLabels": {"pod": "a"}}, ingress=[{"from": [
        {"namespaceSelector": {"matchLabels": {NS_KEY: "x"}}, "podSelector": {"matchLabels": {"pod": "a"}}}]}])
    ingress_z = policy("allow-from-xa-on-za", "z", {"matchLabels": {"pod": "a"}}, ingress=[{"from": [
        {"namespaceSelector": {"matchLabels": {NS_KEY: "x"}}, "podSelector": {"matchLabels": {"pod": "a"}}}]}])
    reach = expect(False, pods=pods)
    reach[("x/a", "y/a")] = True
    reach[("y/a", "z/a")] = False
    reach[("z/a", "x/a")] = True
    reach[("y/a", "x/a")] = True
    assert table([egress, ingress_y, ingress_z], pods=pods) == reach


def test_default_policy_types():
    """policyTypes defaults to Ingress (+ Egress when egress rules exist): egress-only rules isolate egress"""
    pods = [("x", "a"), ("y", "a")]
    pol = {"metadata": {"namespace": "x", "name": "p"}, "spec": {"podSelector": {}, "egress": [
        {"to": [{"namespaceSelector": {"matchLabels": {NS_KEY: "z"}}}]}]}}
    # ingress isolated (no ingress rules) and egress isolated to z only
    assert table([pol], pods=pods) == expect(False, pods=pods)


# --- the probe: names, Services and agnhost's messages ------------------------------------------

def probe_net(policies=(), dns=True):
    objs, namespaces = cluster([("x", "a"), ("y", "a")])
    dns_pod = pod("kube-system", "coredns-1", "10.244.9.2")
    dns_pod["metadata"]["labels"] = {"k8s-app": "kube-dns"}
    dns_pod["spec"]["containers"][0]["ports"] = [{"name": "dns", "containerPort": 53, "protocol": "UDP"},
                                                 {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"}]
    services = [{"metadata": {"namespace": "y", "name": "s-y-a"},
                 "spec": {"clusterIP": "10.96.0.50", "selector": {"pod": "a"},
                          "ports": [{"port": 8080, "targetPort": "serve-80-tcp", "protocol": "TCP"}]}}]
    if dns:
        objs.append(dns_pod)
        services.append({"metadata": {"namespace": "kube-system", "name": "kube-dns"},
                         "spec": {"clusterIP": "10.96.0.10", "selector": {"k8s-app": "kube-dns"},
                                  "ports": [{"port": 53, "protocol": "UDP", "targetPort": 53}]}})
    namespaces.append({"metadata": {"name": "kube-system", "labels": {NS_KEY: "kube-system"}}})
    return Network(objs, services, namespaces, list(policies)), objs[0]


def test_probe_service_name_to_endpoint():
    net, client = probe_net()
    assert net.connect(client, "s-y-a.y.svc.cluster.local:8080") == (0, "")
    assert net.connect(client, "s-y-a.y:8080") == (0, "")
    assert net.connect(client, "10.96.0.50:8080") == (0, "")
    code, log = net.connect(client, "nope.y.svc.cluster.local:80")
    assert code == 1 and log.startswith("DNS: lookup nope.y.svc.cluster.local on 10.96.0.10:53: no such host")


def test_probe_denied_is_timeout_and_closed_port_refused():
    deny = deny_ingress("y")
    net, client = probe_net([deny])
    assert net.connect(client, "s-y-a.y:8080") == (1, "TIMEOUT\n")
    net, client = probe_net()
    assert net.connect(client, "10.244.2.10:9999") == (1, "REFUSED\n")
    code, log = net.connect(client, "10.244.2.10:9999", "udp")
    assert code == 1 and log.startswith("REFUSED: ")


def test_probe_dns_needs_egress_to_dns():
    only_y = policy("egress-y", "x", {}, egress=[{"to": [{"namespaceSelector": {"matchLabels": {NS_KEY: "y"}}}]}],
                    types=["Egress"])
    net, client = probe_net([only_y])
    code, log = net.connect(client, "s-y-a.y:8080")
    assert code == 1 and "DNS: lookup s-y-a.y on 10.96.0.10:53" in log and "i/o timeout" in log
    assert net.connect(client, "10.96.0.50:8080") == (0, "")        # by IP no lookup is needed


def test_probe_service_without_endpoints_refused():
    net, client = probe_net()
    net.services[0]["spec"]["selector"] = {"pod": "nobody"}
    assert net.connect(client, "10.96.0.50:8080") == (1, "REFUSED\n")


@pytest.mark.parametrize("spec,expected", [
    ({"image": "registry.k8s.io/e2e-test-images/agnhost:2.53", "args": ["connect", "s:80", "--timeout=3s"]},
     ("s:80", "tcp")),
    ({"image": "agnhost:2.53", "command": ["/agnhost"], "args": ["connect", "--protocol=udp", "s:53"]},
     ("s:53", "udp")),
    ({"image": "agnhost:2.53", "args": ["netexec", "--http-port=80"]}, None),
    ({"image": "busybox", "args": ["connect", "s:80"]}, None),
])
def test_probe_args(spec, expected):
    assert probe_args({"spec": {"containers": [dict(spec, name="c")]}}) == expected


def test_peer_outside_pods_matches_only_ip_block():
    net, client = probe_net()
    outside = Peer("192.0.2.7")
    pol = policy("from-ns", "y", {}, ingress=[{"from": [{"namespaceSelector": {}}]}])
    net = Network(net.pods, net.services, [{"metadata": {"name": n, "labels": {NS_KEY: n}}}
                                           for n in ("x", "y")], [pol])
    dst = net.peer_of_pod(net.pods[1])
    assert not net.allowed(outside, dst, 80)
    assert net.allowed(net.peer_of_pod(net.pods[0]), dst, 80)
