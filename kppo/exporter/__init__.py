"""Export: TFLite and SavedModel artifacts with normalization and action scaling baked in (`artifact`), their
conversion to TFLite (`convert`), their parity check against the Python policy (`parity`), int8 calibration data
(`calibration`)."""
