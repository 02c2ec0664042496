# Sidekiq as a real application, against one server: enqueues jobs with Sidekiq's client
# APIs (perform_async on two weighted queues, push_bulk, perform_in / perform_at, jobs that
# are retried, dead at once, dead after a retry, never retried), runs a Sidekiq server
# process (`sidekiq -r ./app.rb -c 5 -q default -q critical,2`) until they are all done
# (with a SCRIPT FLUSH under the scheduler on the way), stops it with the API
# (Process#stop!) while a job is still running (requeued by the hard shutdown), examines
# everything with Sidekiq's API (Stats, Queue, ScheduledSet, RetrySet, DeadSet,
# ProcessSet, Workers), and prints a deterministic JSON summary (sorted; no timings, ids or
# jids) on stdout, so that the summaries from two servers can be compared for equality.
#
# Usage: ruby tests/sidekiq/driver.rb REDIS_URL [JOBS] [SIDEKIQ_LOG]
#   JOBS: the number of plain jobs (default 1500), spread over perform_async (two queues)
#   and push_bulk. The database of REDIS_URL is flushed first.
#
# Every wait is bounded: a wait that times out is reported in the summary ("timeouts"), the
# run goes on, and the Sidekiq process is stopped by its pid at the end in any case.
require "json"
require "timeout"

url = ARGV[0] or abort("usage: driver.rb REDIS_URL [JOBS] [SIDEKIQ_LOG]")
JOBS = Integer(ARGV[1] || 1500)
SIDEKIQ_LOG = ARGV[2] || File::NULL
ENV["REDIS_URL"] = url
HERE = __dir__

require_relative "app"
require "sidekiq/api"
Sidekiq.logger.level = Logger::WARN

$summary = {}
$timeouts = []
$errors = []

def note(key, value)
  $summary[key] = value
end

def redis(&block)
  Sidekiq.redis(&block)
end

# Waits at most `seconds` for the block to be truthy; records a timeout otherwise.
def wait_for(what, seconds, every: 0.1)
  deadline = Time.now + seconds
  loop do
    return true if yield
    if Time.now > deadline
      $timeouts << what
      return false
    end
    sleep every
  end
end

# A step whose exception is recorded (class and message) rather than ending the run.
def step(name)
  yield
rescue => e
  $errors << "#{name}: #{e.class}: #{e.message[0, 300]}"
  nil
end

def deep_sort(value)
  case value
  when Hash then value.keys.sort.to_h { |k| [k, deep_sort(value[k])] }
  when Array then value.map { |v| deep_sort(v) }
  else value
  end
end

# What a job record shows, without jids or times.
def job_view(job)
  view = {"class" => job.klass, "args" => job.args, "queue" => job.queue}
  %w[retry retry_count error_class error_message retry_queue].each do |k|
    view[k] = job[k] unless job[k].nil?
  end
  view["enqueued_at?"] = !job.enqueued_at.nil?
  view["created_at?"] = !job.created_at.nil?
  view
end

def sorted_views(jobs)
  jobs.map { |j| job_view(j) }.sort_by { |v| JSON.generate(v) }
end

# The Sidekiq server process.
$sidekiq_pid = nil
def start_sidekiq(url)
  log = File.open(SIDEKIQ_LOG, "a")
  $sidekiq_pid = Process.spawn(
    {"REDIS_URL" => url},
    "sidekiq", "-r", "./app.rb", "-c", "5", "-q", "default", "-q", "critical,2",
    "-g", "check", "-t", "5", "-e", "production",
    chdir: HERE, out: log, err: log, pgroup: true
  )
  log.close
end

# Waits at most `seconds` for the Sidekiq process to exit; true when it did.
def sidekiq_exited?(seconds)
  deadline = Time.now + seconds
  loop do
    return true if Process.waitpid($sidekiq_pid, Process::WNOHANG)
    return false if Time.now > deadline
    sleep 0.1
  end
rescue Errno::ECHILD
  true
end

def stop_sidekiq
  return unless $sidekiq_pid
  unless sidekiq_exited?(0)
    Process.kill("TERM", $sidekiq_pid)
    unless sidekiq_exited?(10)
      Process.kill("KILL", $sidekiq_pid)
      sidekiq_exited?(5)
    end
  end
  $sidekiq_pid = nil
rescue Errno::ESRCH
  $sidekiq_pid = nil
end
at_exit { stop_sidekiq }

def hash_counts(key)
  redis { |c| c.hgetall(key) }.transform_values(&:to_i)
end

# ---------------------------------------------------------------------------------------
# Before the Sidekiq process starts: enqueue, and look at queues and sets while still.

redis { |c| c.flushdb }
info = Sidekiq.redis_info
note "redis_version_major", info["redis_version"].to_s.split(".").first

n_default = JOBS * 2 / 5
n_critical = JOBS / 5
n_bulk = JOBS - n_default - n_critical
n_bulk_critical = n_bulk / 3
n_bulk_default = n_bulk - n_bulk_critical
expected = {} # "kind:id" => 1

n_default.times do |i|
  CountJob.perform_async(i, "async")
  expected["async:#{i}"] = 1
end
n_critical.times do |i|
  CountJob.set(queue: "critical").perform_async(i, "async_critical")
  expected["async_critical:#{i}"] = 1
end
# push_bulk in slices of 100 (each is one MULTI of SADD queues + LPUSH queue:NAME).
n_bulk_default.times.each_slice(100) do |ids|
  jids = Sidekiq::Client.push_bulk("class" => CountJob, "args" => ids.map { |i| [i, "bulk"] })
  $errors << "push_bulk returned #{jids.size} jids for #{ids.size}" unless jids.size == ids.size
  ids.each { |i| expected["bulk:#{i}"] = 1 }
end
ids = (0...n_bulk_critical).to_a
Sidekiq::Client.push_bulk("class" => CountJob, "queue" => "critical", "args" => ids.map { |i| [i, "bulk_critical"] })
ids.each { |i| expected["bulk_critical:#{i}"] = 1 }

# Scheduled a few seconds ahead: moved to their queue by the poller (EVALSHA).
now = Time.now.to_f
20.times do |i|
  CountJob.perform_in(1 + (i % 4), i, "scheduled")
  expected["scheduled:#{i}"] = 1
end
5.times do |i|
  CountJob.set(queue: "critical").perform_at(now + 2, i, "scheduled_at")
  expected["scheduled_at:#{i}"] = 1
end
Sidekiq::Client.push_bulk("class" => CountJob, "args" => (0...10).map { |i| [i, "bulk_at"] },
  "at" => (0...10).map { |i| now + 1 + i * 0.2 })
10.times { |i| expected["bulk_at:#{i}"] = 1 }

# Scheduled an hour ahead, at distinct times: stay in the schedule set.
far_base = now + 3600
12.times { |i| CountJob.perform_at(far_base + i, i, "far") }

# Failing jobs.
3.times { |i| RetryOkJob.perform_async(i) }
2.times { |i| DeadNowJob.perform_async(i) }
2.times { |i| DeadLaterJob.perform_async(i) }
NoRetryJob.perform_async(0)
2.times { |i| LongRetryJob.perform_async(i) }
SlowJob.perform_async(0)
3.times { |i| expected["retry_ok:#{i}"] = 1 }
expected["slow:0"] = 1

# A queue that nobody works: looked at, trimmed and cleared with the Queue API.
10.times { |i| Sidekiq::Client.enqueue_to("doomed", CountJob, i, "doomed") }
# And one that stays until the end.
6.times { |i| Sidekiq::Client.enqueue_to(:parked, CountJob, i, "parked") }

step("before") do
  stats = Sidekiq::Stats.new
  before = {
    "enqueued" => stats.enqueued,
    "scheduled_size" => stats.scheduled_size,
    "retry_size" => stats.retry_size,
    "dead_size" => stats.dead_size,
    "processed" => stats.processed,
    "failed" => stats.failed,
    "processes_size" => stats.processes_size,
    "queues" => stats.queues,
    "default_queue_latency_positive" => stats.default_queue_latency > 0,
    "queue_names" => Sidekiq::Queue.all.map(&:name),
    "queue_lengths" => Sidekiq::Stats::Queues.new.lengths,
    "scheduled_set_size" => Sidekiq::ScheduledSet.new.size,
    "process_set_size" => Sidekiq::ProcessSet.new.size
  }
  doomed = Sidekiq::Queue.new("doomed")
  listed = doomed.map { |j| j.args }
  before["doomed_each"] = listed
  before["doomed_size"] = doomed.size
  before["doomed_latency_positive"] = doomed.latency > 0
  victim = doomed.find { |j| j.args == [3, "doomed"] }
  before["doomed_find_job"] = !doomed.find_job(victim.jid).nil?
  before["doomed_find_missing_job"] = doomed.find_job("0123456789abcdef01234567").nil?
  before["doomed_delete"] = victim.delete
  before["doomed_size_after_delete"] = doomed.size
  # Delete the even ones while iterating (Queue#each copes with deletions).
  doomed.each { |j| j.delete if j.args[0].even? }
  before["doomed_after_deleting_evens"] = doomed.map { |j| j.args[0] }
  doomed.clear
  before["doomed_size_after_clear"] = doomed.size
  before["queue_names_after_clear"] = Sidekiq::Queue.all.map(&:name)
  ss = Sidekiq::ScheduledSet.new
  before["scheduled_each_kinds"] = ss.map { |e| e.args[1] }.tally
  first_far = ss.find { |e| e.args == [0, "far"] }
  before["scheduled_find_job"] = ss.find_job(first_far.jid)&.args
  before["scheduled_scan_far"] = ss.scan("\"far\"").count
  note "before", before
end

# ---------------------------------------------------------------------------------------
# Run the Sidekiq process until every job has run.

start_sidekiq(url)

step("process_set") do
  if wait_for("process in ProcessSet", 20) { Sidekiq::ProcessSet.new.size == 1 }
    process = Sidekiq::ProcessSet.new.first
    note "process", {
      "queues" => process.queues.sort,
      "concurrency" => process["concurrency"],
      "tag" => process.tag,
      "labels" => process.labels,
      "stopping" => process.stopping?,
      "has_identity" => !process.identity.to_s.empty?,
      "beat_positive" => process["beat"] > 0
    }
  end
end

# The slow job shows in Sidekiq::Workers once a heartbeat (every 5 s) has seen it.
step("workers") do
  wait_for("slow job started", 30) { redis { |c| c.exists?("t:slow_started") } }
  if wait_for("slow job in Workers", 15) { Sidekiq::Workers.new.any? { |_p, _t, w| w["payload"]["class"] == "SlowJob" } }
    works = Sidekiq::Workers.new.select { |_p, _t, w| w["payload"]["class"] == "SlowJob" }
    note "workers_slow", works.map { |_p, _t, w| {"queue" => w["queue"], "args" => w["payload"]["args"]} }
  end
  redis { |c| c.set("t:release", "1") }
end

done = lambda do
  runs = redis { |c| c.hlen("t:runs") }
  dead = Sidekiq::DeadSet.new.size
  retries = Sidekiq::RetrySet.new.size
  runs >= expected.size && dead >= 4 && retries >= 2 &&
    redis { |c| c.scard("t:exhausted") } >= 2 &&
    redis { |c| c.hget("t:attempts", "no_retry:0") }.to_i >= 1
end
wait_for("every job done", 60, &done)

# Idle processors blocked in BRPOP are woken by a push (MULTI of SADD queues + LPUSH): the
# time each of these jobs takes to be picked up goes to stderr only (it is not
# deterministic), the runs to the summary.
step("pickup") do
  latencies = 10.times.map do |i|
    started = Time.now
    CountJob.set(queue: i.even? ? "default" : "critical").perform_async(i, "probe")
    expected["probe:#{i}"] = 1
    wait_for("probe #{i} ran", 10, every: 0.002) { redis { |c| c.hexists("t:runs", "probe:#{i}") } }
    ((Time.now - started) * 1000).round
  end
  warn "driver: pickup latencies of idle processors (ms): #{latencies.join(" ")}"
end

# The scheduler's script cache is flushed: its EVALSHA gets NOSCRIPT, it loads the script
# again (Sidekiq looks for an error message starting with "NOSCRIPT").
step("noscript") do
  err = begin
    redis { |c| c.evalsha("f" * 40, keys: ["schedule"], argv: ["0"]) }
    "no error"
  rescue Redis::CommandError => e
    e.message.split.first
  end
  note "evalsha_unknown_error", err
  note "script_flush", redis { |c| c.script(:flush) }
  3.times do |i|
    CountJob.perform_in(1, i, "after_flush")
    expected["after_flush:#{i}"] = 1
  end
  wait_for("scheduled jobs after SCRIPT FLUSH", 20) do
    redis { |c| c.hmget("t:runs", *(0...3).map { |i| "after_flush:#{i}" }) }.all?
  end
end
sleep 1 # a job run twice would run again within this second

# A job still running at the stop: requeued by the hard shutdown after -t 5 seconds.
step("stuck") do
  StuckJob.perform_async(0)
  wait_for("stuck job started", 10) { redis { |c| c.exists?("t:stuck_started") } }
end

# Stop it with the API (a TERM signal in "IDENTITY-signals", read by the next heartbeat).
step("stop!") do
  process = Sidekiq::ProcessSet.new.first
  if process
    process.stop!
    note "stopped_by_api", sidekiq_exited?(25)
  else
    note "stopped_by_api", "no process"
  end
end
stop_sidekiq

# ---------------------------------------------------------------------------------------
# After: every job ran exactly once; stats and sets as the runs left them.

step("runs") do
  runs = hash_counts("t:runs")
  note "runs", {
    "expected" => expected.size,
    "ran_once" => runs.count { |k, v| expected.key?(k) && v == 1 },
    "ran_more_than_once" => runs.select { |k, v| v > 1 }.sort.to_h,
    "missing" => (expected.keys - runs.keys).sort.first(50),
    "missing_count" => (expected.keys - runs.keys).size,
    "unexpected" => (runs.keys - expected.keys).sort.first(50),
    "seen" => redis { |c| c.scard("t:seen") },
    "by_kind" => runs.keys.map { |k| k.split(":").first }.tally
  }
  note "queue_runs", hash_counts("t:queue_runs")
  note "attempts", hash_counts("t:attempts")
  note "exhausted", redis { |c| c.smembers("t:exhausted") }.sort
end

step("stats") do
  stats = Sidekiq::Stats.new
  history = Sidekiq::Stats::History.new(2)
  note "stats_after", {
    "processed" => stats.processed,
    "failed" => stats.failed,
    "scheduled_size" => stats.scheduled_size,
    "retry_size" => stats.retry_size,
    "dead_size" => stats.dead_size,
    "enqueued" => stats.enqueued,
    "processes_size" => stats.processes_size,
    "workers_size" => stats.workers_size,
    "queues" => stats.queues,
    "history_processed" => history.processed.values.sum,
    "history_failed" => history.failed.values.sum,
    "process_set_size" => Sidekiq::ProcessSet.new.size
  }
end

step("retry_set") do
  rs = Sidekiq::RetrySet.new
  out = {"size" => rs.size, "entries" => sorted_views(rs.to_a)}
  out["all_error"] = rs.all?(&:error?)
  e0 = rs.find { |e| e.args == [0] }
  out["find_job"] = rs.find_job(e0.jid)&.args
  out["fetch"] = rs.fetch(e0.score).map(&:args)
  out["fetch_jid"] = rs.fetch(e0.score, e0.jid).map(&:args)
  out["scan"] = rs.scan("long_retry").count
  # "Retry now": back to its queue with retry_count one less.
  e0.retry
  out["size_after_retry"] = rs.size
  out["default_queue_after_retry"] = sorted_views(Sidekiq::Queue.new("default").to_a)
  # Kill the other: to the dead set.
  rs.find { |e| e.args == [1] }.kill
  out["size_after_kill"] = rs.size
  note "retry_set", out
end

step("dead_set") do
  ds = Sidekiq::DeadSet.new
  out = {"size" => ds.size, "entries" => sorted_views(ds.to_a)}
  d0 = ds.find { |e| e.klass == "DeadNowJob" && e.args == [0] }
  out["find_job"] = ds.find_job(d0.jid)&.klass
  d0.retry
  out["size_after_retry"] = ds.size
  ds.find { |e| e.klass == "DeadLaterJob" && e.args == [1] }.delete
  out["size_after_delete"] = ds.size
  out["entries_after"] = sorted_views(ds.to_a)
  ds.retry_all
  out["size_after_retry_all"] = ds.size
  out["default_queue_after"] = sorted_views(Sidekiq::Queue.new("default").to_a)
  ds.kill(Sidekiq.dump_json({"class" => "CountJob", "args" => [0, "killed"], "queue" => "default", "jid" => "0" * 24}), notify_failure: false)
  out["size_after_kill"] = ds.size
  ds.clear
  out["size_after_clear"] = ds.size
  note "dead_set", out
end

step("scheduled_set") do
  ss = Sidekiq::ScheduledSet.new
  out = {"size" => ss.size, "each_in_order" => ss.map(&:args)}
  e5 = ss.find { |e| e.args == [5, "far"] }
  out["fetch"] = ss.fetch(e5.score).map(&:args)
  out["find_job"] = ss.find_job(e5.jid)&.args
  e5.delete
  out["size_after_delete"] = ss.size
  e7 = ss.find { |e| e.args == [7, "far"] }
  out["delete_by_value"] = ss.delete_by_value(ss.name, e7.value)
  e2 = ss.find { |e| e.args == [2, "far"] }
  out["delete_by_jid"] = ss.delete_by_jid(e2.score, e2.jid) == true
  # Reschedule [0, far] after every other (ZINCRBY by a float).
  e0 = ss.find { |e| e.args == [0, "far"] }
  e0.reschedule(far_base + 100.25)
  out["order_after_reschedule"] = ss.map(&:args)
  r0 = ss.find { |e| e.args == [0, "far"] }
  out["rescheduled_score_offset"] = (r0.score - far_base).round(3)
  e3 = ss.find { |e| e.args == [3, "far"] }
  e3.add_to_queue
  out["size_after_add_to_queue"] = ss.size
  out["default_queue_has_far_3"] = Sidekiq::Queue.new("default").any? { |j| j.args == [3, "far"] }
  out["scan"] = ss.scan("far").map(&:args).sort
  ss.clear
  out["size_after_clear"] = ss.size
  note "scheduled_set", out
end

step("queues") do
  parked = Sidekiq::Queue.new("parked")
  out = {
    "names" => Sidekiq::Queue.all.map(&:name),
    "sizes" => Sidekiq::Queue.all.to_h { |q| [q.name, q.size] },
    "parked_each" => parked.map(&:args),
    "parked_latency_positive" => parked.latency > 0,
    "parked_views" => sorted_views(parked.to_a)
  }
  j = parked.find { |x| x.args == [4, "parked"] }
  out["parked_find_job"] = parked.find_job(j.jid)&.args
  out["parked_delete"] = j.delete
  out["parked_after_delete"] = parked.map(&:args)
  parked.clear
  out["names_after_clear"] = Sidekiq::Queue.all.map(&:name)
  out["stats_queues"] = Sidekiq::Stats.new.queues
  out["enqueued"] = Sidekiq::Stats.new.enqueued
  note "queues", out
end

step("reset") do
  Sidekiq::Stats.new.reset("failed")
  stats = Sidekiq::Stats.new
  note "after_reset", {"failed" => stats.failed, "processed_positive" => stats.processed > 0}
end

note "timeouts", $timeouts
note "errors", $errors
puts JSON.pretty_generate(deep_sort($summary))
