//! Locks shared between threads where a panic elsewhere must not take the data with it.

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex that a panicking thread may have poisoned: the data (statistics, tables)
/// stay usable.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
