"""Cluster twins: the controllers that make the simulated cluster behave.

start(store, spec) registers the nodes of the cluster spec (see
simcluster.clusterfile), then runs every twin on one worker thread, driven by
store events and timers. The twins use only the Store protocol
(simcluster/store_api.py), so their writes pass admission like a real
controller's.
"""

from .acceptance_programs import AcceptancePrograms
from .context import CLUSTER_POLICIES, GPU_CLUSTERS, Ctx
from .device_plugin import DevicePlugin
from .dra import ResourceClaimController, kubelet_hook as dra_kubelet_hook
from .dra_driver import DraDriver
from .gpu_operator import GpuOperator
from .kai import KaiConfigDeployer, KaiOperator, KaiPodGrouper
from .kai_scheduler import KaiScheduler
from .kubelet import Kubelet
from .kueue import Kueue
from .load import LoadTwin
from .mig_manager import MigManager
from .nccl_tests import NcclTests
from .nodes import Nodes
from .runtime import Runtime
from .scheduler import Scheduler
from .volumes import PersistentVolumes, register as register_storage_classes
from .workloads import (DaemonSets, Deployments, GarbageCollector, Jobs, ReplicaSets,
                        StatefulSets)


class Handle:
    """What start() returns: stop() ends the twins; settle() waits for quiet (tests)."""

    def __init__(self, store, ctx, runtime):
        self.store = store
        self.ctx = ctx
        self.runtime = runtime

    @property
    def errors(self):
        return self.runtime.errors

    def settle(self, timeout=10.0, horizon=0.0):
        return self.runtime.settle(timeout, horizon)

    def stop(self):
        try:
            self.store.unsubscribe(self.runtime.on_event)
        except AttributeError:
            pass
        self.runtime.stop()


def build(store, spec):
    """Create the twins without starting the thread (tests may drive passes by hand)."""
    runtime = Runtime()
    ctx = Ctx(store, spec, runtime)
    runtime.on_change = ctx.invalidate
    ctx.nodes = Nodes(ctx)
    ctx.operator = GpuOperator(ctx)
    ctx.mig = MigManager(ctx)
    ctx.plugin = DevicePlugin(ctx)
    ctx.dra_driver = DraDriver(ctx)
    ctx.kubelet = Kubelet(ctx)
    ctx.kubelet.hooks.append(dra_kubelet_hook(ctx))     # claims are prepared before any container starts
    ctx.kubelet.hooks += [ctx.plugin.pod_hook, ctx.operator.pod_hook, KaiConfigDeployer(ctx).pod_hook,
                          NcclTests(ctx).pod_hook, LoadTwin(ctx).pod_hook, AcceptancePrograms(ctx).pod_hook]
    # What each full-pass twin reads (runtime.py): a change elsewhere (a flood of new
    # namespaces, say) no longer runs them. The kubelet is keyed and declares its own.
    ctx.operator.unwatched = {"namespaces"}
    ctx.mig.watches = ctx.plugin.watches = {"nodes", "pods", CLUSTER_POLICIES, GPU_CLUSTERS, "deployments.apps"}
    # order matters only for speed of convergence: observers first, then writers of pods
    runtime.controllers = [GarbageCollector(ctx), ctx.nodes, ctx.operator, ctx.mig, ctx.plugin, ctx.dra_driver,
                           Deployments(ctx), ReplicaSets(ctx), DaemonSets(ctx), StatefulSets(ctx),
                           Kueue(ctx), Jobs(ctx), PersistentVolumes(ctx), ResourceClaimController(ctx), Scheduler(ctx), KaiOperator(ctx), KaiPodGrouper(ctx),
                           KaiScheduler(ctx),
                           ctx.kubelet]
    return ctx, runtime


def start(store, spec):
    ctx, runtime = build(store, spec)
    ctx.nodes.register()
    register_storage_classes(store, spec)
    store.subscribe(runtime.on_event)
    runtime.start()
    runtime.kick()
    return Handle(store, ctx, runtime)
