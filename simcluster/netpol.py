"""NetworkPolicy (networking.k8s.io/v1) evaluation and the agnhost `connect` probe.

No packet exists in the simulated cluster, so this module decides what a CNI that
enforces NetworkPolicy would do with one connection:

    net = Network(pods, services, namespaces, policies)
    net.allowed(src, dst, port, protocol)     # src/dst: Peer (a pod, or an IP outside pods)
    net.connect(client_pod, "svc.ns:80", "tcp")  # -> (exit code, log) like agnhost connect

Semantics (k8s.io/api/networking/v1 types.go, the NetworkPolicy concept page):
- a pod is isolated for ingress (egress) when a policy of its namespace selects it
  and lists Ingress (Egress) in policyTypes; policyTypes defaults to Ingress, plus
  Egress when the policy has egress rules; an isolated pod accepts only what some
  rule of some selecting policy allows (policies are additive);
- a connection needs the source's egress AND the destination's ingress;
- a rule without `from`/`to` matches every peer, without `ports` every port; a peer
  is podSelector (policy's namespace), namespaceSelector (all pods there), both in
  one peer (pods matching both), or ipBlock (cidr minus except; matched on IPs);
- a port is a number (with endPort a range) or a named container port of the
  destination pod, with protocol TCP (default), UDP or SCTP.
A Service ClusterIP is translated to one ready endpoint pod first (kube-proxy runs
before the policy), so policies see pod addresses, as with every common CNI.
"""

import ipaddress
import re
from .selectors import label_selector_matches as selector_matches

AGNHOST_MARKER = "agnhost"
DNS_NAMESPACE = "kube-system"
DNS_SERVICE = "kube-dns"
CLUSTER_DOMAIN = "cluster.local"
NETEXEC_DEFAULTS = {"http-port": 8080, "udp-port": 8081}
PROTOCOLS = {"tcp": "TCP", "udp": "UDP", "sctp": "SCTP"}


# ---------------------------------------------------------------------------
# selectors and peers
# ---------------------------------------------------------------------------



class Peer:
    """One end of a connection: a pod (with its namespace's labels) or a bare IP."""

    def __init__(self, ip, pod=None, namespace_labels=None):
        self.ip = ip
        self.pod = pod
        self.namespace_labels = namespace_labels or {}

    @property
    def namespace(self):
        return self.pod["metadata"]["namespace"] if self.pod else None

    @property
    def labels(self):
        return (self.pod["metadata"].get("labels") or {}) if self.pod else {}

    def __repr__(self):
        if self.pod:
            return "Peer(%s/%s %s)" % (self.namespace, self.pod["metadata"]["name"], self.ip)
        return "Peer(%s)" % self.ip


def in_ip_block(block, ip):
    try:
        addr = ipaddress.ip_address(ip)
        net = ipaddress.ip_network(block["cidr"], strict=False)
    except (ValueError, KeyError, TypeError):
        return False
    if addr.version != net.version or addr not in net:
        return False
    for text in block.get("except") or []:
        try:
            if addr in ipaddress.ip_network(text, strict=False):
                return False
        except ValueError:
            continue
    return True


def peer_matches(peer_spec, policy_ns, other):
    """Does `other` (a Peer) match one NetworkPolicyPeer of a policy in `policy_ns`?"""
    if "ipBlock" in peer_spec and peer_spec["ipBlock"] is not None:
        return other.ip is not None and in_ip_block(peer_spec["ipBlock"], other.ip)
    pod_sel = peer_spec.get("podSelector")
    ns_sel = peer_spec.get("namespaceSelector")
    if other.pod is None:
        return False                      # pod and namespace selectors only select pods
    if ns_sel is not None:
        if not selector_matches(ns_sel, other.namespace_labels):
            return False
    elif other.namespace != policy_ns:
        return False
    return pod_sel is None or selector_matches(pod_sel, other.labels)


def container_ports(pod):
    ports = []
    for container in (pod or {}).get("spec", {}).get("containers") or []:
        for port in container.get("ports") or []:
            ports.append({"name": port.get("name"), "port": port.get("containerPort"),
                          "protocol": port.get("protocol", "TCP")})
    return ports


def port_matches(rule_port, port, protocol, dst_pod):
    if (rule_port.get("protocol") or "TCP") != protocol:
        return False
    value = rule_port.get("port")
    if value is None:
        return True                       # all ports of the protocol
    if isinstance(value, str) and not value.isdigit():
        # a named port is the destination pod's container port of that name and protocol
        return any(p["name"] == value and p["port"] == port and p["protocol"] == protocol
                   for p in container_ports(dst_pod))
    value = int(value)
    end = rule_port.get("endPort")
    return value <= port <= int(end) if end is not None else port == value


def policy_types(policy):
    spec = policy.get("spec") or {}
    if spec.get("policyTypes"):
        return spec["policyTypes"]
    return ["Ingress"] + (["Egress"] if spec.get("egress") else [])


# ---------------------------------------------------------------------------
# the network
# ---------------------------------------------------------------------------

class Network:
    def __init__(self, pods, services=(), namespaces=(), policies=()):
        self.pods = [p for p in pods if (p.get("status") or {}).get("podIP")]
        self.services = list(services)
        self.ns_labels = dict((n["metadata"]["name"], n["metadata"].get("labels") or {}) for n in namespaces)
        self.policies = {}
        for policy in policies:
            self.policies.setdefault(policy["metadata"]["namespace"], []).append(policy)

    @classmethod
    def from_ctx(cls, ctx):
        return cls(ctx.list("pods"), ctx.list("services"), ctx.list("namespaces"),
                   ctx.list("networkpolicies.networking.k8s.io"))

    # -- addresses ------------------------------------------------------------------
    def peer_of_pod(self, pod):
        ns = pod["metadata"]["namespace"]
        return Peer((pod.get("status") or {}).get("podIP"), pod, self.ns_labels.get(ns))

    def peer_of_ip(self, ip):
        for pod in self.pods:
            if pod["status"]["podIP"] == ip and not pod["spec"].get("hostNetwork") \
                    and pod["status"].get("phase") in ("Running", "Pending"):
                return self.peer_of_pod(pod)
        return Peer(ip)

    def service_by_ip(self, ip):
        for svc in self.services:
            if ip in ((svc.get("spec") or {}).get("clusterIPs") or [svc.get("spec", {}).get("clusterIP")]):
                return svc
        return None

    def service_named(self, name, namespace):
        for svc in self.services:
            if svc["metadata"]["name"] == name and svc["metadata"]["namespace"] == namespace:
                return svc
        return None

    def endpoints(self, svc, port, protocol):
        """[(pod, target port)] of the ready pods behind one Service port (EndpointSlice controller)."""
        spec = svc.get("spec") or {}
        svc_port = next((p for p in spec.get("ports") or [] if p.get("port") == port
                         and (p.get("protocol") or "TCP") == protocol), None)
        if svc_port is None or not spec.get("selector"):
            return None
        found = []
        for pod in self.pods:
            if pod["metadata"]["namespace"] != svc["metadata"]["namespace"]:
                continue
            if not selector_matches({"matchLabels": spec["selector"]}, pod["metadata"].get("labels")):
                continue
            if not _ready(pod):
                continue
            target = svc_port.get("targetPort", port)
            if isinstance(target, str) and not target.isdigit():
                named = [p for p in container_ports(pod) if p["name"] == target and p["protocol"] == protocol]
                if not named:
                    continue
                target = named[0]["port"]
            found.append((pod, int(target)))
        return sorted(found, key=lambda e: e[0]["metadata"]["name"])

    # -- policy ---------------------------------------------------------------------
    def _direction_allows(self, subject, other, direction, port, protocol, dst_pod):
        """Policies of `subject`'s namespace for one direction: None = not isolated."""
        if subject.pod is None:
            return None
        selecting = [p for p in self.policies.get(subject.namespace, [])
                     if direction in policy_types(p)
                     and selector_matches((p.get("spec") or {}).get("podSelector") or {}, subject.labels)]
        if not selecting:
            return None
        key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
        for policy in selecting:
            ns = policy["metadata"]["namespace"]
            for rule in (policy.get("spec") or {}).get(key) or []:
                peers = rule.get(peers_key)
                if peers and not any(peer_matches(ps, ns, other) for ps in peers):
                    continue
                ports = rule.get("ports")
                if ports and not any(port_matches(rp, port, protocol, dst_pod) for rp in ports):
                    continue
                return policy["metadata"]["name"]
        return False

    def allowed(self, src, dst, port, protocol="TCP"):
        """True when src may open `protocol` `port` on dst (both egress and ingress allow)."""
        egress = self._direction_allows(src, dst, "Egress", port, protocol, dst.pod)
        if egress is False:
            return False
        return self._direction_allows(dst, src, "Ingress", port, protocol, dst.pod) is not False

    # -- the probe --------------------------------------------------------------------
    def _dns_server(self):
        return self.service_named(DNS_SERVICE, DNS_NAMESPACE)

    def resolve(self, client, host):
        """(ip, None) or (None, agnhost's DNS error) for a name as the client's resolver sees it."""
        try:
            ipaddress.ip_address(host)
            return host, None
        except ValueError:
            pass
        dns = self._dns_server()
        if dns is not None:
            dns_ip = dns["spec"].get("clusterIP")
            ok = self._reach(client, dns_ip, 53, "UDP")
            if ok != "ok":
                return None, ("lookup %s on %s:53: read udp %s:40000->%s:53: i/o timeout"
                              % (host, dns_ip, client.ip, dns_ip))
            where = "on %s:53" % dns_ip
        else:
            where = "on 127.0.0.53:53"
        parts = host.rstrip(".").split(".")
        suffix = ["svc"] + CLUSTER_DOMAIN.split(".")
        if len(parts) >= 2 and parts[2:] in ([], suffix[:1], suffix):
            svc = self.service_named(parts[0], parts[1])
        elif len(parts) == 1:
            svc = self.service_named(parts[0], client.namespace)
        else:
            svc = None
        if svc is None or not svc["spec"].get("clusterIP") or svc["spec"]["clusterIP"] == "None":
            return None, "lookup %s %s: no such host" % (host, where)
        return svc["spec"]["clusterIP"], None

    def _reach(self, client, ip, port, protocol):
        """'ok' | 'timeout' | 'refused' for one connection attempt to an IP."""
        svc = self.service_by_ip(ip)
        if svc is not None:
            eps = self.endpoints(svc, port, protocol)
            if eps is None:
                return "timeout"          # no such Service port: nothing answers on the VIP
            if not eps:
                return "refused"          # kube-proxy rejects a Service without endpoints
            pod, target = eps[0]
            dst = self.peer_of_pod(pod)
            port = target
        else:
            dst = self.peer_of_ip(ip)
        if not self.allowed(client, dst, port, protocol):
            return "timeout"              # the CNI drops denied packets
        if dst.pod is None:
            return "ok"                   # outside the pods: the simulated network has no other hosts
        if not _listens(dst.pod, port, protocol):
            return "refused"
        return "ok"

    def connect(self, client_pod, target, protocol="tcp"):
        """(exit code, stderr) of `agnhost connect target --protocol=protocol` in client_pod."""
        proto = PROTOCOLS.get((protocol or "tcp").lower())
        if proto is None:
            return 1, "Unsupported protocol\n%s" % protocol
        host, sep, port_text = target.rpartition(":")
        if not sep or not port_text.isdigit():
            return 1, "UNKNOWN: address %s: missing port in address\n" % target
        client = self.peer_of_pod(client_pod)
        ip, error = self.resolve(client, host.strip("[]"))
        if error:
            return 1, "DNS: %s\n" % error
        outcome = self._reach(client, ip, int(port_text), proto)
        if outcome == "ok":
            return 0, ""
        if outcome == "refused":
            if proto == "UDP":
                return 1, "REFUSED: read udp %s:40000->%s: read: connection refused\n" % (client.ip, target)
            return 1, "REFUSED\n"
        if proto == "UDP":
            return 1, "TIMEOUT: read udp %s:40000->%s: i/o timeout\n" % (client.ip, target)
        return 1, "TIMEOUT\n"


def _ready(pod):
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def _listens(pod, port, protocol):
    """Declared containerPorts, plus the ports agnhost's servers open from their args."""
    if any(p["port"] == port and p["protocol"] == protocol for p in container_ports(pod)):
        return True
    for container in pod["spec"].get("containers") or []:
        if AGNHOST_MARKER not in (container.get("image") or ""):
            continue
        args = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
        flags = dict(NETEXEC_DEFAULTS) if "netexec" in args else {}
        for arg in args:
            if arg.startswith("--") and "=" in arg:
                key, _, value = arg[2:].partition("=")
                if value.isdigit():
                    flags[key] = int(value)
        if protocol == "TCP" and port in (flags.get("http-port"), flags.get("port")):
            return True
        if protocol == "UDP" and port in (flags.get("udp-port"), flags.get("port")):
            return True
    return False


# ---------------------------------------------------------------------------
# kubelet hook: a pod running `agnhost connect host:port`
# ---------------------------------------------------------------------------

def probe_args(pod):
    """(target, protocol) when the pod's first container runs `agnhost connect`, else None."""
    containers = pod["spec"].get("containers") or []
    if not containers or AGNHOST_MARKER not in (containers[0].get("image") or ""):
        return None
    words = [str(a) for a in (containers[0].get("command") or []) + (containers[0].get("args") or [])]
    words = [w for w in words if not w.endswith("agnhost")]
    if not words or words[0] != "connect":
        return None
    target, protocol = None, "tcp"
    rest = words[1:]
    for i, word in enumerate(rest):
        if word.startswith("--protocol="):
            protocol = word.split("=", 1)[1]
        elif word == "--protocol" and i + 1 < len(rest):
            protocol = rest[i + 1]
        elif not word.startswith("-") and target is None and (i == 0 or rest[i - 1] != "--protocol"):
            target = word
    return (target or ""), protocol


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
MAX_TIMEOUT_WAIT = 5.0      # seconds a dropped connection keeps a probe running at most


def probe_timeout(pod):
    """agnhost's --timeout (a Go duration: 500ms, 2s, 1m) in seconds, or None."""
    container = pod["spec"]["containers"][0]
    for word in [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]:
        if word.startswith("--timeout="):
            match = _DURATION.match(word.split("=", 1)[1])
            if match:
                return float(match.group(1)) * _UNIT[match.group(2)]
    return None


def probe_hook(ctx):
    """Kubelet hook: the probe pod completes with agnhost's exit code and message; a connection
    the policy drops keeps it running for its --timeout first, as the real dial does."""
    def hook(pod, elapsed):
        args = probe_args(pod)
        if args is None:
            return None
        if not (pod.get("status") or {}).get("podIP") and ctx.kubelet is not None:
            pod = dict(pod, status=dict(pod.get("status") or {}, podIP=ctx.kubelet._pod_ip(pod)))
        code, log = Network.from_ctx(ctx).connect(pod, *args)
        name = pod["spec"]["containers"][0]["name"]
        delay = ctx.timings["job_run"]
        if "TIMEOUT" in log:
            delay = max(delay, min(probe_timeout(pod) or 0.0, MAX_TIMEOUT_WAIT))
        return {"kind": "complete", "exit": code, "delay": delay, "logs": {name: log}}
    return hook
