"""Reading Google Benchmark JSON written by resident's benches, and the reports and gates
built on it.

Modules: ``units`` (time units), ``naming`` (benchmark names), ``loader`` (validated
runs), ``stats`` (medians, spread, before/after changes), ``contracts`` (transfer
contracts), ``tables`` and ``plotting`` (output), ``compare_report`` and ``run_report``
(the two reports), ``cli`` (error handling shared by the entry scripts).
"""
