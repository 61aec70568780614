"""The command line, `kppo train | eval | export` (`main`); run directories (`runs`, `reporting`, `population`)."""
