// Package batches runs one frozen plan over many items: a batch records the
// digest of the plan it was opened with, and each item is a run of that
// plan, reserved (its run started, its run id recorded) in the transaction
// that admits it. A crash leaves an item reserved with a known run, and a
// resume continues that run rather than starting another; reserving an
// item twice returns the original run.
//
// Items come from a [Source] in strictly increasing byte order of their
// keys; a page out of order is refused naming the key. The cursor is the
// contiguous settled prefix (an item stuck at 400 holds it at 399 though
// 401-500 finished); it is an optimisation, and re-reading from anywhere
// before it is safe. Whether the source was read to its end is recorded.
//
// There is no "succeeded": a finished batch is completed with succeeded,
// failed and quarantined counts, maintained as items settle rather than
// counted; a windowed pass ([Client.Run] with a maximum) leaves it running.
// [Report.NeedsAttention] is computed from the in-flight, exhausted,
// failed and quarantined counts, and [Client.NeedingAttention] lists which
// items, oldest key first, from an index. An item is admitted untrusted
// unless its source vouches for it, and its run gets the batch's item
// ceilings ([ItemBudget]). See docs/batches.md.
package batches
