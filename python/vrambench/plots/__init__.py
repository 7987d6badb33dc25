"""vrambench's plots: results model and loader, figures, command line (python/vrambench/plots)."""
