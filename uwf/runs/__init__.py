"""The run registry: run events, the runs view, queries, reruns and the registry's freshness."""
