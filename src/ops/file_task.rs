//! A file task on a blocking thread, for the operations that read and write
//! the config path and its markers; a task that panicked is an error text.
//!
//! It runs what it is given; it must not touch a file itself.

/// Runs `f` on a blocking thread.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("a file task failed: {e}"))
}
