"""What a write strategy is: the hooks the forecast's rank program calls, and what the layout asks of it."""

from __future__ import annotations


class WriteStrategy:
    """How each output hour's files (history and restart) reach storage.

    The class answers the layout before any rank starts (writer ranks, a description); an instance
    lives on every rank of the program, made with that rank's Forecast (rank.py, ``self.fc``), and
    works through its services: ``write`` and ``write_whole`` (a file landed and its record),
    ``land``, ``make_rows`` (this rank's band of a block), ``band_items``, ``buffers``,
    ``buffer_pool``, ``message``, ``receive_bands``, ``wait_all``, ``barrier``, ``write_record``,
    ``take_overheads`` and ``record_overheads``. Plans are plan.FilePlan, one per file of the hour
    in the inventory's order.
    """

    # Whether it writes shared files through MPI-IO: then the program runs on the parallel-netCDF stack
    # (config ``parallel_stack``: its launcher and Python), not on the default one.
    shared_file = False

    @classmethod
    def writer_ranks(cls, layout) -> int:
        """Ranks after the compute ranks that only write (run :meth:`writer_loop`)."""
        return 0

    @classmethod
    def one_writer(cls, layout) -> bool:
        """Whether one rank writes at a time: then a probe of the free pages before each file tells what that
        file meets (hostmemory.fresh_before_write); ranks writing at once share the pages they probe."""
        return False

    @classmethod
    def describe(cls, layout) -> str:
        text = f"{layout.strategy}, {layout.compute} compute ranks"
        if layout.writers:
            text += f" + {layout.write_groups} write groups x {layout.tasks_per_group} tasks"
        return text

    def __init__(self, fc):
        self.fc = fc

    def output(self, index: int, plans: list) -> int:
        """A compute rank's output of hour ``index``; returns the data bytes it wrote or handed over.

        The rank program times the call as the hour's ``write_effective`` (less the CPU work booked
        apart), so the call returns when the rank may go on computing.
        """
        raise NotImplementedError

    def finish(self) -> float:
        """A compute rank's work after the last hour, before every file is on storage; returns its CPU seconds.

        ``write_final`` leaves those seconds out; the hook records them itself.
        """
        return 0.0

    def writer_loop(self) -> None:
        """A writer rank's whole program (only with :meth:`writer_ranks`)."""
        raise NotImplementedError(f"{type(self).__name__} has no writer ranks")
