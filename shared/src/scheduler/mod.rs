//! The scheduler: filters, scores, the assume cache and explanations.
