// The console's live updates.
