"""Pod IPs as the host-local IPAM plugin hands them out on each node.

Every node has its own /24 pod CIDR: node n (1-based in the cluster file, 0 for a node it
does not list) gets 10.(244 + n // 256).(n % 256).0/24, so the first 255 nodes keep the
kubeadm-style 10.244.n.0/24 and 1000 nodes still get distinct ranges. An address is held from
the pod's start until the pod is gone; the next one is looked for round-robin after the last
handed out (as host-local does), skipping every address a pod holds, so two pods never share
one. Addresses the pods already show when a node's pool is first used (a restarted simulator)
count as held. A full range gives no address (the real plugin fails the sandbox).
"""

FIRST, LAST = 2, 254          # .0 network, .1 the node's bridge, .255 broadcast


def subnet(n):
    return "10.%d.%d." % (244 + n // 256, n % 256)


class PodIPs:
    def __init__(self):
        self.by_uid = {}      # pod uid -> (node, host number)
        self.pools = {}       # node -> _Pool

    def ip(self, uid, node, n, pods_on_node):
        """The pod's address (allocated on first call); pods_on_node() lists the node's pods,
        read once to seed a pool with the addresses they already show."""
        got = self.by_uid.get(uid)
        if got is not None:
            return self.pools[got[0]].prefix + str(got[1])
        pool = self.pools.get(node)
        if pool is None:
            pool = self.pools[node] = _Pool(subnet(n), pods_on_node())
        host = pool.take(uid)
        if host is None:
            return None
        self.by_uid[uid] = (node, host)
        return pool.prefix + str(host)

    def release(self, uid):
        got = self.by_uid.pop(uid, None)
        if got is not None:
            self.pools[got[0]].held.pop(got[1], None)


class _Pool:
    def __init__(self, prefix, pods):
        self.prefix = prefix
        self.held = {}                          # host number -> pod uid
        self.next = FIRST
        for p in pods:
            ip = (p.get("status") or {}).get("podIP") or ""
            if ip.startswith(prefix) and ip[len(prefix):].isdigit():
                self.held[int(ip[len(prefix):])] = p["metadata"].get("uid")

    def take(self, uid):
        size = LAST - FIRST + 1
        for i in range(size):
            host = FIRST + (self.next - FIRST + i) % size
            if host not in self.held:
                self.held[host] = uid
                self.next = FIRST + (host - FIRST + 1) % size
                return host
        return None
