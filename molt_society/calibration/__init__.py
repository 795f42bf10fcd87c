"""Fitting the behaviour model to a real MoltBook dump, and checking a society against one.

``calibration.moments`` computes the moments a society is compared on (from a dump's events, a simulated
society or the stored events of any society); ``calibration.fit`` estimates the behaviour model's
parameters from a dump by the method of simulated moments; ``calibration.fitted_file`` writes and reads the
fitted file.
"""
