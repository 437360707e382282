"""The forecast program's error, apart so that the layout, the plan and the strategies all raise it."""


class ForecastError(RuntimeError):
    """The MPI forecast failed or timed out; the message names the rank and its error."""
