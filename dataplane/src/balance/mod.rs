//! Balancing: which eligible endpoint gets the next request.
