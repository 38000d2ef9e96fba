"""What finished units give: out-of-fold predictions, the blend and ensemble, resuming, submissions, the report and the run's folder."""
