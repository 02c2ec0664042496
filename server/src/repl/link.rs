//! A replica's link to its master (to be written).
