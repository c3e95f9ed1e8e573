package worker

// Listening returns a channel closed once w listens on [NotifyChannel]: a
// test that shows a job ran through its notification, and not through the
// poll, enqueues it after.
func Listening(w *Client) <-chan struct{} { return w.listening }
