//! rollcall-controller (see issue 2): not built yet.
