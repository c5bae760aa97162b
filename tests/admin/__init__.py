"""The AdminServer's JSON commands and the Prometheus /metrics port, compared with a real
ZooKeeper's (its Jetty AdminServer; its metric names, from source)."""
