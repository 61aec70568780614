"""The agent: Keras actor and critic networks, the deployable `Policy`, the numpy actor the host path acts with,
the agent bundle (`Agent`: networks + distribution + optimizer) and its saving without pickle."""
