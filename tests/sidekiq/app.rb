# The Sidekiq application of scripts/sidekiq-check: worker classes whose side effects are
# recorded in Redis under "t:*" keys, so that driver.rb can check that every job ran
# exactly once. Loaded by both the Sidekiq server process (`sidekiq -r ./app.rb`) and the
# driver. The server is given by REDIS_URL.
require "sidekiq"

# redis-rb 4.8 warns at every SADD and BRPOP of Sidekiq 6.4.
Redis.silence_deprecations = true

redis_config = {url: ENV.fetch("REDIS_URL"), network_timeout: 5}
Sidekiq.configure_client { |config| config.redis = redis_config }
Sidekiq.configure_server do |config|
  config.redis = redis_config
  # Poll the schedule and retry sets every 0.5..1.5 s (and start within 0..5 s) rather than
  # every 5 s after a 10 s wait, so that scheduled jobs and retries complete in time.
  config.options[:poll_interval_average] = 1
  config.options[:labels] = ["check"]
end

module SidekiqCheck
  # Retry delays without Sidekiq's random jitter (up to 9 s per attempt), so a retry comes
  # back exactly `sidekiq_retry_in` seconds later.
  module NoJitter
    private

    def delay_for(worker, count, exception)
      if worker&.sidekiq_retry_in_block
        custom = retry_in(worker, count, exception).to_i
        return custom if custom > 0
      end
      super
    end
  end

  def self.record(conn, kind, id, queue)
    conn.multi do |t|
      t.hincrby("t:runs", "#{kind}:#{id}", 1)
      t.hincrby("t:queue_runs", queue, 1)
      t.sadd("t:seen", "#{kind}:#{id}")
    end
  end

  # The attempt number of this execution of job "kind:id" (1 the first time).
  def self.attempt(conn, kind, id)
    conn.hincrby("t:attempts", "#{kind}:#{id}", 1)
  end
end
require "sidekiq/job_retry"
Sidekiq::JobRetry.prepend(SidekiqCheck::NoJitter)

# The plain job: counts its runs.
class CountJob
  include Sidekiq::Worker

  def perform(id, kind)
    Sidekiq.redis { |c| SidekiqCheck.record(c, kind, id, queue_name) }
  end

  def queue_name
    # The queue it was fetched from (the job hash is not kept by the worker).
    Thread.current[:sidekiq_check_queue] || "?"
  end
end

# Server middleware: remembers each job's queue for CountJob#queue_name.
class QueueNote
  def call(_worker, _job, queue)
    Thread.current[:sidekiq_check_queue] = queue
    yield
  ensure
    Thread.current[:sidekiq_check_queue] = nil
  end
end
Sidekiq.configure_server do |config|
  config.server_middleware { |chain| chain.add QueueNote }
end

# Fails twice, succeeds at the third attempt; its retries go to the critical queue.
class RetryOkJob
  include Sidekiq::Worker
  sidekiq_options retry: 5, retry_queue: "critical"
  sidekiq_retry_in { |_count, _exception| 1 }

  def perform(id)
    n = Sidekiq.redis { |c| SidekiqCheck.attempt(c, "retry_ok", id) }
    raise ArgumentError, "attempt #{n} of retry_ok #{id} fails" if n < 3
    Sidekiq.redis { |c| SidekiqCheck.record(c, "retry_ok", id, "?") }
  end
end

# No retry at all: goes straight to the dead set.
class DeadNowJob
  include Sidekiq::Worker
  sidekiq_options retry: 0

  def perform(id)
    Sidekiq.redis { |c| SidekiqCheck.attempt(c, "dead_now", id) }
    raise "dead_now #{id} always fails"
  end
end

# One retry, then the dead set.
class DeadLaterJob
  include Sidekiq::Worker
  sidekiq_options retry: 1
  sidekiq_retry_in { |_count, _exception| 1 }
  sidekiq_retries_exhausted do |msg, _exception|
    Sidekiq.redis { |c| c.sadd("t:exhausted", "dead_later:#{msg["args"][0]}") }
  end

  def perform(id)
    Sidekiq.redis { |c| SidekiqCheck.attempt(c, "dead_later", id) }
    raise KeyError, "dead_later #{id} always fails"
  end
end

# retry: false: neither retried nor kept in the dead set.
class NoRetryJob
  include Sidekiq::Worker
  sidekiq_options retry: false

  def perform(id)
    Sidekiq.redis { |c| SidekiqCheck.attempt(c, "no_retry", id) }
    raise "no_retry #{id} fails"
  end
end

# Fails once and waits an hour in the retry set (examined by the driver with RetrySet).
class LongRetryJob
  include Sidekiq::Worker
  sidekiq_options retry: 3
  sidekiq_retry_in { |_count, _exception| 3600 }

  def perform(id)
    Sidekiq.redis { |c| SidekiqCheck.attempt(c, "long_retry", id) }
    raise "long_retry #{id} fails"
  end
end

# Runs until the driver sets t:release (at most 40 s), so it shows in Sidekiq::Workers.
class SlowJob
  include Sidekiq::Worker
  sidekiq_options retry: false

  def perform(id)
    Sidekiq.redis { |c| c.set("t:slow_started", "1") }
    deadline = Time.now + 40
    sleep 0.05 until Sidekiq.redis { |c| c.exists?("t:release") } || Time.now > deadline
    Sidekiq.redis { |c| SidekiqCheck.record(c, "slow", id, "?") }
  end
end

# Still running when the process is stopped: after the shutdown timeout (-t 5) Sidekiq
# pushes it back onto its queue (RPUSH) and kills its thread.
class StuckJob
  include Sidekiq::Worker

  def perform(id)
    Sidekiq.redis { |c| c.set("t:stuck_started", "1") }
    deadline = Time.now + 40
    sleep 0.05 until Sidekiq.redis { |c| c.exists?("t:never") } || Time.now > deadline
    Sidekiq.redis { |c| SidekiqCheck.record(c, "stuck", id, "?") }
  end
end
