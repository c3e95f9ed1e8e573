package schedules

// MaxCron is the longest cron expression accepted, in bytes.
const MaxCron = 200
