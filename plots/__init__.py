"""vrambench's plots: results model and loader, figures, command line (plots/plot.py)."""
