"""Report: records of every timed event, their aggregation into tables, benchmark tables, figures."""
