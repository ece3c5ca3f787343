//! One message per line: how requests, replies and events are framed on the socket.

/// Framing: the compact JSON of `v` and a newline (JSON text never contains a raw
/// newline, so a line is a message).
pub(crate) fn line<T: serde::Serialize + ?Sized>(v: &T) -> String {
    let mut s = serde_json::to_string(v).unwrap_or_else(|e| format!("{{\"ok\":false,\"error\":\"serialising: {e}\"}}"));
    s.push('\n');
    s
}
