"""The statistics, over plain arrays: the panel's majority outcomes, Krippendorff's alpha,
filing-clustered bootstrap intervals and paired comparisons.

May import `protocol` and `_util`."""
