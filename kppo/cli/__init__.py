"""The command line, `kppo train | eval | export | tune` (`main`), a module a command (`train`, `evaluate`, `export`,
`tune`); what they share (`configs`, `sources`); run directories (`runs`, `reporting`, `population`)."""
