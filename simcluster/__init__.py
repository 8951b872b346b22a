"""simcluster: a simulated Kubernetes cluster with GPU Operator behaviour.

Test and demo tooling of skaffon.gpu_platform; not part of the collection
build. It deliberately does not import the collection's code, so that the
names it uses are an independent reading of upstream (a typo on either side
fails a test instead of agreeing with itself).
"""
