"""The test kit shared by tests/ and simcluster/tests (importable as `kit`: pytest.ini puts tests/ on
sys.path and loads `kit.plugin`).

    kit.paths      the repository, ../shared and the upstream files in it (the ONE place that spells them)
    kit.plugin     the pytest plugin: the `simcluster` fixture, `needs_shared` skips, `render_chart`
    kit.charts     `helm template` of a chart, cached per chart, values and helm major
    kit.playbook   ansible-playbook runs and their JSON results
    kit.zygote     warm interpreters that fork the runs' ansible-playbook and module processes
                   (kit/zygote_client.py calls them; both stand-alone scripts, not imported by tests)
    kit.*          helpers of the integration tests (inventories, GPU Operator, queues, MIG, ...)
"""
