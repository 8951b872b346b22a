#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: workload_acceptance
short_description: Run the workload acceptance (training and inference) in a team namespace
version_added: 0.3.0
author: skaffon.gpu_platform contributors (@skaffon)
description:
  - Runs the steps of the workload acceptance by their fixed ids, in this order - C(queued-job) (the training
    Job through the team's queue - wait and admission reason), C(data-staged) (dataset sample and base weights
    onto the data volume - bytes and seconds per source), C(nccl-allreduce) (nccl-tests C(all_reduce_perf) as a
    gang, one pod per node - bus bandwidth per size and on average against the pool's expected figure; names a
    slow node or wrong results), C(training-window) (throughput in samples per second over a fixed window),
    C(checkpoint-restore) (checkpoint written, the rank-0 pod deleted - the step it resumed from and the
    recovery seconds), C(labels-exported), C(cost-baseline) and C(inference-serving).
  - Runs the objects the role C(workload_acceptance) rendered from the team's job templates (O(manifests)) as
    they are, with the run label C(skaffon.io/acceptance-run) added, in the team namespace O(namespace).
    The programs (O(scripts)) go into the ConfigMap C(wla-scripts), which the templates mount at
    C(/opt/skaffon/acceptance).
  - A failing step does not fail the module; its result names the cause. A step whose input step failed is
    SKIP. The role writes the report first and fails afterwards.
  - Every object the run created is removed at the end, also when a step failed.
  - A low all-reduce result is located with runs pinned to two nodes each - disjoint pairs first (at the same time), then every
    node of a bad pair with a node of a good pair; a node whose pairs are all bad is named.
notes:
  - C(queued-job) removes the training Job again once its pods are bound (the benchmark gang needs the same
    GPUs); C(training-window) submits it anew and leaves it running for C(checkpoint-restore), so the program's
    own run (C(--seconds)) must outlast the window plus the checkpoint wait.
  - The rank-0 pod is the pod with completion index 0 (an Indexed Job) or the Job's only pod; its log carries the
    programs' JSON lines. C(checkpoint-restore) deletes that pod; the Job must replace it (C(backoffLimit) above 0).
  - The nccl-tests Job follows Open MPI's launcher pattern - an Indexed Job whose index 0 runs C(mpirun); for a pair
    run its copy gets 2 pods, required node affinity on C(kubernetes.io/hostname), mpirun's C(-np) scaled and a
    hostfile the script writes (C(seq 0 N-1) over C(<job>-$i.<service>)) renamed.
  - Times in the programs' lines are unix seconds; the recovery time is the first step's time after the restore
    minus the time of the delete on the control node, so the clocks of the nodes and the control node must agree.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: Nothing is created; every step reports SKIP (check mode - no workload is created).
  diff_mode:
    support: none
    details: The test objects are removed again; there is nothing to show as a diff.
  platform:
    platforms: posix
  action_group:
    membership: [skaffon.gpu_platform.k8s]
options:
  steps:
    description: Ids of the steps to run (their order is kept).
    type: list
    elements: str
    default: [queued-job, data-staged, nccl-allreduce, training-window, checkpoint-restore, labels-exported,
              cost-baseline, inference-serving]
  namespace:
    description: The team namespace the workloads run in (its quota, queue and policies apply).
    type: str
    required: true
  team:
    description: The team (for the report).
    type: str
  pool:
    description: The node pool the workloads run on (for the report).
    type: str
  run_id:
    description:
      - Value of the label C(skaffon.io/acceptance-run) on every object of the run. Default - C(wla-) and the
        UTC time.
    type: str
  manifests:
    description:
      - The rendered objects by purpose, each a list of complete Kubernetes objects (dicts).
    type: dict
    default: {}
    suboptions:
      training:
        description: The multi-node training Job (training-job template), its headless Service, claims it needs.
        type: list
        elements: dict
        default: []
      checkpoint:
        description:
          - The checkpoint PersistentVolumeClaim (checkpoint-pvc template). Empty - the checkpoint directory is
            not persistent and C(checkpoint-restore) fails with that cause.
        type: list
        elements: dict
        default: []
      data:
        description: The data PersistentVolumeClaim and the stage Job.
        type: list
        elements: dict
        default: []
      nccl:
        description: The nccl-tests Indexed Job (launcher at index 0) and its headless Service.
        type: list
        elements: dict
        default: []
      serving:
        description: The serving Deployment, Service and PodDisruptionBudget.
        type: list
        elements: dict
        default: []
      load:
        description: The load generator Job.
        type: list
        elements: dict
        default: []
  scripts:
    description: File name to content of the programs (C(train.py), C(stage.py), C(load.py)).
    type: dict
    default: {}
  queue_backend:
    description: The site's queue backend (how admission is read).
    type: str
    choices: [none, kai, kueue]
    default: none
  expected_busbw_gbps:
    description: The pool's expected all-reduce bus bandwidth in GB/s (inventory, per fabric). Unset - not compared.
    type: float
  min_busbw_fraction:
    description: The average bus bandwidth must reach O(expected_busbw_gbps) times this.
    type: float
    default: 0.8
  training_window_seconds:
    description: Seconds of training measured for the throughput.
    type: int
    default: 300
  checkpoint_timeout:
    description: Seconds to wait for a checkpoint line, and beyond the pod timeout for the resumed step.
    type: int
    default: 600
  pod_timeout:
    description: Seconds a pod may take to be scheduled and to start; a deleted Job's pods to go.
    type: int
    default: 300
  queue_timeout:
    description: Seconds a Job may wait in the queue before the step fails naming the queue and the last reason.
    type: int
    default: 600
  stage_timeout:
    description: Seconds the stage Job may take to download every source.
    type: int
    default: 1800
  benchmark_timeout:
    description: Seconds one nccl-tests run may take after its pods are bound.
    type: int
    default: 900
  prometheus_url:
    description: Prometheus HTTP API base URL (C(labels-exported); unset - SKIP).
    type: str
  price_per_gpu_hour:
    description: The pool's price of one GPU hour (C(cost-baseline)).
    type: float
  currency:
    description: Currency of the prices.
    type: str
    default: EUR
  baseline:
    description: The baseline to compare with (C(cost-baseline)) - the unit and its price.
    type: dict
    suboptions:
      unit: {description: What one unit is (for example 1000 samples)., type: str}
      price_per_unit: {description: The baseline's price of one unit., type: float}
  inference:
    description: The load of C(inference-serving).
    type: dict
    default: {}
    suboptions:
      requests_seconds: {description: Seconds of load., type: int, default: 60}
      max_error_rate: {description: Highest error rate that passes., type: float, default: 0.0}
      p99_ms_max: {description: Highest p99 latency in ms that passes (unset - not compared)., type: float}
      rollout: {description: Roll the Deployment out during the load., type: bool, default: true}
"""

EXAMPLES = r"""
- name: Run the workload acceptance for team-a on the H100 pool
  skaffon.gpu_platform.workload_acceptance:
    namespace: team-a
    team: team-a
    pool: h100
    queue_backend: kueue
    expected_busbw_gbps: 360
    manifests:
      training: "{{ training_objects }}"
      checkpoint: "{{ checkpoint_objects }}"
      data: "{{ data_objects }}"
      nccl: "{{ nccl_objects }}"
      serving: "{{ serving_objects }}"
      load: "{{ load_objects }}"
    scripts:
      train.py: "{{ lookup('file', 'train.py') }}"
      stage.py: "{{ lookup('file', 'stage.py') }}"
      load.py: "{{ lookup('file', 'load.py') }}"
  register: workload
"""

RETURN = r"""
results:
  description: One entry per step, in run order.
  returned: always
  type: list
  elements: dict
  contains:
    id: {description: The step id., type: str, returned: always}
    title: {description: What it measures., type: str, returned: always}
    status: {description: One of PASS FAIL SKIP., type: str, returned: always}
    summary: {description: One line verdict; a FAIL names the cause., type: str, returned: always}
    evidence: {description: What was seen., type: list, elements: str, returned: always}
    figures:
      description:
        - The step's figures by name - C(wait_seconds), C(admission_reason) (queued-job); C(bytes), C(seconds),
          C(sources) (data-staged); C(avg_busbw_gbps), C(expected_busbw_gbps), C(rows), C(nodes), C(bad_nodes)
          (nccl-allreduce); C(throughput_samples_per_s), C(steps), C(samples), C(gpu_seconds) (training-window);
          C(checkpoint_seconds), C(recovery_seconds), C(resumed_step) (checkpoint-restore).
      type: dict
      returned: always
    seconds: {description: Time taken., type: float, returned: always}
failed_steps:
  description: Ids of the steps that failed.
  returned: always
  type: list
  elements: str
simulated:
  description: The API server is the simulated cluster (its version ends in C(-simcluster)); its figures are simulated.
  returned: always
  type: bool
kubernetes_version:
  description: The API server's version.
  returned: always
  type: str
run_id:
  description: The value of the run label on the objects of this run.
  returned: always
  type: str
"""

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.module_base import GpuPlatformModule
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import runner
# imported for their @step functions, which fill runner.STEPS
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import allreduce as wla_allreduce  # noqa: F401 pylint: disable=unused-import
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import data as wla_data  # noqa: F401 pylint: disable=unused-import
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import queue as wla_queue  # noqa: F401 pylint: disable=unused-import
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import training as wla_training  # noqa: F401 pylint: disable=unused-import
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import labels as wla_labels  # noqa: F401 pylint: disable=unused-import
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import cost as wla_cost  # noqa: F401 pylint: disable=unused-import
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import inference as wla_inference  # noqa: F401 pylint: disable=unused-import

SIMULATED_SUFFIX = "-simcluster"


def argspec():
    objects = dict(type="list", elements="dict", default=[])
    return dict(
        steps=dict(type="list", elements="str", default=list(runner.STEP_IDS)),
        namespace=dict(type="str", required=True),
        team=dict(type="str"),
        pool=dict(type="str"),
        run_id=dict(type="str"),
        manifests=dict(type="dict", default={}, options=dict(
            training=objects, checkpoint=dict(objects), data=dict(objects), nccl=dict(objects),
            serving=dict(objects), load=dict(objects))),
        scripts=dict(type="dict", default={}),
        queue_backend=dict(type="str", choices=["none", "kai", "kueue"], default="none"),
        expected_busbw_gbps=dict(type="float"),
        min_busbw_fraction=dict(type="float", default=0.8),
        training_window_seconds=dict(type="int", default=300),
        checkpoint_timeout=dict(type="int", default=600),
        pod_timeout=dict(type="int", default=300),
        queue_timeout=dict(type="int", default=600),
        stage_timeout=dict(type="int", default=1800),
        benchmark_timeout=dict(type="int", default=900),
        prometheus_url=dict(type="str"),
        price_per_gpu_hour=dict(type="float"),
        currency=dict(type="str", default="EUR"),
        baseline=dict(type="dict", options=dict(unit=dict(type="str"), price_per_unit=dict(type="float"))),
        inference=dict(type="dict", default={}, options=dict(
            requests_seconds=dict(type="int", default=60), max_error_rate=dict(type="float", default=0.0),
            p99_ms_max=dict(type="float"), rollout=dict(type="bool", default=True))),
    )


def server_version(kube):
    try:
        return kube.dynamic.version["kubernetes"]["gitVersion"]
    except Exception:  # the version is only shown in the report
        return ""


def run(module):
    ids = module.params["steps"]
    runner.validate_ids(ids)
    runner.validate_params(module.params)
    ctx = runner.Context(module.kube, module.params)
    if module.check_mode:
        results = [runner.Result(step_id, runner.SKIP, "check mode: no workload is created")
                   for step_id in runner.STEP_IDS if step_id in ids]
    else:
        results = runner.run(ctx, ids)
    version = server_version(module.kube)
    return dict(changed=ctx.changed, results=[r.to_dict() for r in results], kubernetes_version=version,
                simulated=version.endswith(SIMULATED_SUFFIX), run_id=ctx.run_label,
                failed_steps=[r.id for r in results if r.status == runner.FAIL])


def main():
    GpuPlatformModule(argument_spec=argspec(), supports_check_mode=True).execute(run)


if __name__ == "__main__":
    main()
