"""kppo's deployment kit (distribution `kppo-runtime`): run an exported policy with numpy + LiteRT only (no
TensorFlow, no kppo). `kppo_runtime.runtime` needs nothing else; `kppo_runtime.evaluate` also needs gymnasium (extra
`eval`), `kppo_runtime.micro_check` tflite-micro (extra `micro`)."""
