"""The forecast's output as an MPI program under the four write strategies."""
