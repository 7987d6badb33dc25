"""The figures of plots/, tested in-process: the package is imported, results
are built from tests/plot_fixture.py's data through python/vrambench/results.py, each
figure function is called and the returned matplotlib Figure is inspected
(titles, lines, bars, ticks). Needs matplotlib (Debian's python3-matplotlib
for /usr/bin/python3); skipped without it.
"""

import copy
import os
import sys
import unittest

import plot_fixture

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))

from vrambench import results  # noqa: E402

try:
    from vrambench.plots import figures  # noqa: E402  (imports matplotlib)
    import matplotlib.pyplot as plt  # noqa: E402
    from matplotlib.container import BarContainer  # noqa: E402
    HAVE_MATPLOTLIB = True
except ImportError:
    HAVE_MATPLOTLIB = False

H100 = "NVIDIA H100 80GB HBM3"


def sim_result(**options):
    """The fixture's sim result, parsed as plot.py parses a file."""
    return results.parse_result("sim.json", plot_fixture.sim_result(**options))


def titles(figure):
    """Every title text of a figure: suptitle and each axes' title."""
    texts = [figure._suptitle.get_text()] if figure._suptitle else []
    return texts + [ax.get_title() for ax in figure.axes]


def legend_labels(ax):
    legend = ax.get_legend()
    return [text.get_text() for text in legend.get_texts()] if legend else []


def bar_containers(ax):
    return [c for c in ax.containers if isinstance(c, BarContainer)]


@unittest.skipUnless(HAVE_MATPLOTLIB, f"matplotlib is not installed for {sys.executable}")
class Figures(unittest.TestCase):
    """Each figure function on the full fixture (cuda and caching on sim)."""

    @classmethod
    def setUpClass(cls):
        cls.result = sim_result()
        cls.inputs = figures.Inputs(cls.result)
        cls.colors = cls.inputs.colors

    def tearDown(self):
        plt.close("all")

    def assert_device_in_title(self, figure, label="simulated device (simulated)"):
        self.assertTrue(any(label in text for text in titles(figure)), titles(figure))

    def test_timeline_says_simulated_and_has_a_line_per_allocator_and_kind(self):
        figure = figures.timeline_figure(self.result, "training_cleanup", self.colors)
        self.assert_device_in_title(figure)
        ax = figure.axes[0]
        self.assertIn("training_cleanup: memory at each step", ax.get_title())
        labels = legend_labels(ax)
        # One legend entry per distinct reserved series (allocators with equal
        # lines share one, named "a = b"), then the two line kinds.
        named = " ".join(labels)
        for allocator in ("cuda", "caching"):
            self.assertIn(allocator, named)
        self.assertIn("reserved (solid)", labels)
        steps = [point["step"] for point in self.result.runs[0].timeline]
        reserved_lines = [line for line in ax.get_lines() if line.get_linestyle() == "-"]
        dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
        self.assertGreaterEqual(len(reserved_lines), 1)
        self.assertLessEqual(len(reserved_lines), 2)
        self.assertGreaterEqual(len(dashed), 1)
        for line in reserved_lines + dashed:
            self.assertEqual(len(line.get_xdata()), len(
                [run for run in self.result.runs if run.scenario == "training_cleanup"][0].timeline))
        self.assertTrue(steps)

    def test_timeline_of_a_gpu_result_names_the_gpu_and_not_sim(self):
        result = sim_result(scenarios=["views"], device_name=H100, simulated=False)
        figure = figures.timeline_figure(result, "views", figures.Inputs(result).colors)
        self.assert_device_in_title(figure, H100)
        self.assertFalse(any("simulated" in text for text in titles(figure)))

    def test_timeline_of_a_scenario_without_entries_is_no_data(self):
        with self.assertRaises(figures.NoData):
            figures.timeline_figure(self.result, "no_such_scenario", self.colors)

    def test_peaks_has_one_bar_series_per_allocator_in_each_panel(self):
        figure = figures.peaks_figure(self.result, self.colors)
        top, bottom = figure.axes[:2]
        self.assert_device_in_title(figure)
        self.assertEqual(len(bar_containers(top)), 2)
        self.assertEqual(len(bar_containers(bottom)), 2)
        scenarios = {run.scenario for run in self.result.runs}
        self.assertEqual(len(bottom.get_xticks()), len(scenarios))
        self.assertEqual(legend_labels(top)[:2], ["cuda", "caching"])

    def test_latency_per_size_has_p50_and_p99_lines_per_allocator(self):
        micro = results.parse_result("micro.json", plot_fixture.microbench_result())
        figure = figures.latency_figure(self.result, micro, self.colors)
        self.assert_device_in_title(figure)
        malloc_ax, free_ax = figure.axes[:2]
        self.assertEqual(len(malloc_ax.get_lines()), 2 * 2)   # 2 allocators x p50, p99
        self.assertEqual(len(free_ax.get_lines()), 2 * 2)
        self.assertEqual(malloc_ax.get_xscale(), "log")

    def test_latency_per_scenario_without_a_microbench_file(self):
        figure = figures.latency_figure(self.result, None, self.colors)
        self.assert_device_in_title(figure)
        self.assertEqual(len(bar_containers(figure.axes[0])), 2 * 2)   # p50 and p99 bars

    def test_latency_refuses_a_microbench_file_of_another_device(self):
        micro = results.parse_result("micro.json", plot_fixture.microbench_result(
            device_name="NVIDIA H200", simulated=False))
        with self.assertRaises(results.InputError) as raised:
            figures.latency_figure(self.result, micro, self.colors)
        self.assertIn("never mix devices", str(raised.exception))

    def test_empty_cache_loop_has_a_bar_series_per_variant_from_the_families(self):
        figure = figures.empty_cache_loop_figure(self.result, self.colors)
        self.assert_device_in_title(figure)
        self.assertEqual(len(figure.axes), 3)    # iter_ns, driver_calls, peak_reserved_bytes
        for ax in figure.axes:
            self.assertEqual(len(bar_containers(ax)), 3)
        self.assertEqual(legend_labels(figure.axes[0]),
                         ["every iteration", "every 10 iterations", "never"])
        driver_calls = figure.axes[1]
        heights = sorted(bar.get_height() for c in bar_containers(driver_calls) for bar in c)
        # The fixture's driver calls: cuda 48 in every variant; caching 48, 6, 2.
        self.assertEqual(heights, sorted([48, 48, 48, 48, 6, 2]))

    def test_dataloader_draws_peaks_against_the_family_members(self):
        figure = figures.dataloader_figure(self.result, self.colors)
        ax = figure.axes[0]
        self.assert_device_in_title(figure)
        self.assertEqual(list(ax.get_xticks()), [32, 256, 2048, 8192])
        solid = [line for line in ax.get_lines() if line.get_linestyle() == "-"]
        self.assertGreaterEqual(len(solid), 1)
        for line in solid:
            self.assertEqual(list(line.get_xdata()), [32, 256, 2048, 8192])

    def test_figures_with_families_need_the_names(self):
        document = plot_fixture.sim_result(scenarios=["empty_cache_loop"])
        document["names"] = {}
        result = results.parse_result("x.json", document)
        saved = results._catalogue
        results._catalogue = {}       # as if docs/names.json were missing too
        try:
            with self.assertRaises(figures.NoData):
                figures.empty_cache_loop_figure(result, figures.Inputs(result).colors)
        finally:
            results._catalogue = saved

    def test_a_file_without_names_falls_back_to_the_committed_catalogue(self):
        document = plot_fixture.sim_result(scenarios=["dataloader_batches"])
        del document["names"]
        result = results.parse_result("old.json", document)
        figure = figures.dataloader_figure(result, figures.Inputs(result).colors)
        self.assertEqual(list(figure.axes[0].get_xticks()), [32, 256, 2048, 8192])

    def test_segments_has_a_row_per_segment(self):
        run = results.choose_segments_run(self.result, None)
        figure = figures.segments_figure(self.result, run)
        ax = figure.axes[0]
        self.assert_device_in_title(figure)
        self.assertIn(f"{run.scenario} / {run.allocator}", ax.get_title())
        self.assertEqual(len(ax.get_yticks()), len(run.segments))

    def test_segments_without_a_map_is_no_data(self):
        with self.assertRaises(figures.NoData):
            figures.segments_figure(self.result, None)

    def test_compare_of_two_devices_says_so_and_names_both(self):
        other = sim_result(device_name=H100, simulated=False, time_factor=0.5)
        figure = figures.compare_figure(self.result, other)
        title = figure.axes[0].get_title()
        self.assertIn("two different devices", title)
        self.assertIn("simulated device (simulated)", title)
        self.assertIn(H100, title)
        self.assertEqual(len(figure.axes[0].get_images()), 1)

    def test_compare_of_a_sim_and_a_gpu_file_compares_memory_only(self):
        # A simulated device's time is a host-side model's: never set against a GPU's.
        other = sim_result(device_name=H100, simulated=False, time_factor=0.5)
        figure = figures.compare_figure(self.result, other)
        panels = [ax for ax in figure.axes if ax.get_images()]
        self.assertEqual(len(panels), 1)
        text = " ".join(titles(figure))
        self.assertIn("peak reserved: B / A", text)
        self.assertIn("time not compared", text)
        self.assertNotIn("time per iteration", text)

    def test_compare_of_two_sim_files_labels_their_time_host_side(self):
        figure = figures.compare_figure(self.result, sim_result(time_factor=0.5))
        time_titles = [t for t in titles(figure) if "time per iteration" in t]
        self.assertEqual(len(time_titles), 1)
        self.assertIn("host-side time per iteration (simulated device's model)", time_titles[0])

    def test_compare_of_two_gpu_files_compares_time_as_it_is(self):
        gpu = sim_result(device_name=H100, simulated=False)
        figure = figures.compare_figure(gpu, sim_result(device_name=H100, simulated=False, time_factor=0.5))
        self.assertIn("time per iteration: B / A", titles(figure))
        self.assertFalse(any("host-side" in t for t in titles(figure)))

    def test_latency_on_sim_is_labelled_host_side_and_on_a_gpu_not(self):
        micro = results.parse_result("micro.json", plot_fixture.microbench_result())
        figure = figures.latency_figure(self.result, micro, self.colors)
        self.assertIn("host-side", figure.axes[0].get_ylabel())
        self.assertIn("host-side", figure._suptitle.get_text())
        by_scenario = figures.latency_figure(self.result, None, self.colors)
        self.assertTrue(all("host-side" in ax.get_ylabel() for ax in by_scenario.axes[:2]))
        gpu = sim_result(device_name=H100, simulated=False)
        gpu_micro = results.parse_result("micro.json", plot_fixture.microbench_result(device_name=H100,
                                                                                     simulated=False))
        figure = figures.latency_figure(gpu, gpu_micro, figures.Inputs(gpu).colors)
        self.assertNotIn("host-side", figure.axes[0].get_ylabel())

    def test_empty_cache_loop_time_on_sim_is_labelled_host_side(self):
        figure = figures.empty_cache_loop_figure(self.result, self.colors)
        self.assertIn("host-side time per iteration", figure.axes[0].get_ylabel())

    def test_compare_of_one_device_does_not_claim_two(self):
        other = sim_result(time_factor=0.5)
        figure = figures.compare_figure(self.result, other)
        self.assertNotIn("different devices", figure.axes[0].get_title())

    def test_the_table_plans_every_figure_of_the_fixture(self):
        micro = results.parse_result("micro.json", plot_fixture.microbench_result())
        other = sim_result(time_factor=0.5)
        inputs = figures.Inputs(self.result, micro, [other],
                                results.choose_segments_run(self.result, None))
        names = [figure.name for figure in figures.FIGURES]
        self.assertEqual(len(names), len(set(names)))
        for figure in figures.FIGURES:
            for field in figure.needs:
                self.assertTrue(hasattr(inputs, field), (figure.name, field))
        pngs = {}
        for figure in figures.FIGURES:
            for png, draw in figure.plan(inputs):
                pngs[png] = draw
        self.assertIn("compare.png", pngs)
        self.assertIn("empty_cache_loop.png", pngs)
        drawn = pngs["peaks.png"]()
        self.assertEqual(type(drawn).__name__, "Figure")

    def test_inputs_are_not_changed_by_drawing(self):
        before = copy.deepcopy([(run.name, run.values, run.timeline) for run in self.result.runs])
        figures.peaks_figure(self.result, self.colors)
        figures.timeline_figure(self.result, "views", self.colors)
        after = [(run.name, run.values, run.timeline) for run in self.result.runs]
        self.assertEqual(before, after)


if __name__ == "__main__":
    unittest.main()
