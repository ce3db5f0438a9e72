/**
 * The write lane is visible (issue 33, point 5): a credential's writes
 * waiting by class and a rate-limit pause with its end, in the metrics
 * (autolease_forge_writes_waiting, autolease_forge_lane_paused_seconds) and
 * in the `writes` line that `status` and `queue` print, read from a real
 * lane holding a write behind a pause.
 */
import test from 'brittle'
import { Metrics } from '../../lib/daemon/metrics.js'
import { CredentialLane } from '../../lib/queue/forge/credential-lane.js'
import { describeLanes } from '../../lib/cli/commands/status.js'

test('a paused lane with writes waiting: the metrics and the writes line say how many, of which class, and until when', async (t) => {
  const lane = new CredentialLane({ spacingMs: 0 })
  lane.pause(5_000)
  const writes = [lane.write('urgent', async () => 'merge'), lane.write('notice', async () => 'status'), lane.write('notice', async () => 'reaction')]
  const lanes = () => [{ credential: 'acme,default', ...lane.reading() }]
  const metrics = new Metrics(
    { holding: () => true, epoch: () => 1, peers: () => 0, forgeLanes: lanes, rejected: async () => ({}), queues: async () => [] },
    { port: 0 }
  )
  const text = await metrics.registry.metrics()
  t.ok(text.includes('autolease_forge_writes_waiting{credential="acme,default",class="urgent"} 1'), 'one merge waiting')
  t.ok(text.includes('autolease_forge_writes_waiting{credential="acme,default",class="notice"} 2'), 'two notices waiting')
  const paused = Number(/autolease_forge_lane_paused_seconds\{credential="acme,default"\} ([0-9.]+)/.exec(text)?.[1])
  t.ok(paused > 4 && paused <= 5, `paused for ${paused} s more`)

  const [line] = describeLanes(lanes())
  t.comment(line)
  t.ok(line?.startsWith('writes    acme,default: 3 writes waiting (1 merge or update, 2 status, comment or reaction)'), 'the writes line counts them')
  t.ok(line?.includes('paused by a rate limit until') && line.includes('(5 s)'), 'and says the pause and its end')
  t.alike(describeLanes([{ credential: 'default', waiting: { urgent: 0, notice: 0 }, inFlight: false, pausedUntil: null }]), ['writes    default: 0 writes waiting (0 merge or update, 0 status, comment or reaction)'])

  t.alike(await Promise.all(writes), ['merge', 'status', 'reaction'], 'the writes ran once the pause ended, the merge first')
})
