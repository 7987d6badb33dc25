"""vrambench's Python side: the PyTorch plug-in's module (vrambench.plugin),
the snapshot converter (vrambench.torch2trace), the results loader and tables
(vrambench.results, vrambench.results_tables) and the plots (vrambench.plots).
The benchmark itself is the C program `vrambench` (README.md)."""
