"""Export: TFLite, SavedModel and ONNX artifacts with normalization and action scaling baked in (`artifact`), the
`action` function they all hold (`endpoint`), its conversion to TFLite (`convert`) and to ONNX (`onnx`), their parity
check against the Python policy (`parity`), int8 calibration data (`calibration`)."""
