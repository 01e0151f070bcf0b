//! Outlier detection from real traffic: consecutive-failure counters and the error-rate window.
