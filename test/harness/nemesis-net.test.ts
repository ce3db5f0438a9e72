/**
 * The nemesis's lossy links drop what they say, per link and per direction.
 * A packet between two devices crosses two namespaces' rules (the sender's
 * output, the receiver's input), so "25 % on every link" dropped at both
 * ends would be 44 %; the nemesis's liveness target at loss is judged
 * against the rate it names. Measured with real UDP datagrams between real
 * namespaces: 3,000 sent one way, the share that passed the rules must be
 * within 4 points of the rate asked (the binomial spread at that count is
 * under 1 point, and the wrong 44 % is 19 points off). What passed the
 * rules is what the receiver read plus what its kernel dropped for a full
 * socket buffer (a receiver starved of CPU on a loaded machine: the
 * namespace's Udp RcvbufErrors), which is no fault of the rules.
 *
 * Without root (or nftables) there are no namespaces: the run says so and
 * measures nothing, as the nemesis itself does.
 */
import test from 'brittle'
import { spawn } from 'node:child_process'
import { Net } from '../nemesis/net.js'
import { Owned } from '../nemesis/owned.js'

const SENT = 3000
const PORT = 47_311

/** The receiving namespace's count of datagrams its kernel dropped for a full socket buffer (/proc/net/snmp is per namespace). */
const RCVBUF_ERRORS = `()=>{const l=require('fs').readFileSync('/proc/net/snmp','utf8').split('\\n').filter(x=>x.startsWith('Udp:'));const h=l[0].split(/\\s+/),v=l[1].split(/\\s+/);return Number(v[h.indexOf('RcvbufErrors')])}`

/**
 * Datagrams of SENT sent by node `from` that passed the rules to node `to`:
 * read by the receiver, or dropped by its kernel for a full buffer. Told the
 * sender is done, the receiver reads until a poll brings nothing new (a
 * receiver woken late still has datagrams queued).
 */
async function delivered(net: Net, from: number, to: number): Promise<number> {
  const recv = `const drops=${RCVBUF_ERRORS};const s=require('dgram').createSocket('udp4');let n=0,d0=0;s.on('message',()=>n++);s.bind(${PORT},'${net.ipOf(to)}',()=>{d0=drops();process.stdout.write('ready\\n')});process.stdin.on('data',()=>{let last=-1;const drain=()=>setImmediate(()=>{if(n!==last){last=n;drain()}else{process.stdout.write(n+' '+(drops()-d0)+'\\n');process.exit(0)}});drain()})`
  const send = `const s=require('dgram').createSocket('udp4');let i=0;const b=Buffer.alloc(64);const go=()=>{for(let k=0;k<50&&i<${SENT};k++,i++)s.send(b,${PORT},'${net.ipOf(to)}');if(i<${SENT})setTimeout(go,5);else setTimeout(()=>process.exit(0),200)};go()`
  const [cmd, ...args] = net.wrap(to, [process.execPath, '-e', recv])
  const r = spawn(cmd!, args, { stdio: ['pipe', 'pipe', 'inherit'] })
  let out = ''
  r.stdout.on('data', (d: Buffer) => (out += d.toString()))
  await until(() => out.includes('ready\n'))
  const [scmd, ...sargs] = net.wrap(from, [process.execPath, '-e', send])
  const s = spawn(scmd!, sargs, { stdio: 'inherit' })
  await new Promise((resolve) => s.on('close', resolve))
  await new Promise((resolve) => setTimeout(resolve, 300))
  r.stdin.write('done\n')
  await new Promise((resolve) => r.on('close', resolve))
  const [read, overflowed] = (out.trim().split('\n').pop() ?? '').split(' ').map(Number)
  return read! + overflowed!
}

async function until(fn: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !fn(); i++) await new Promise((resolve) => setTimeout(resolve, 10))
  if (!fn()) throw new Error('receiver did not start')
}

test('nemesis loss: 25 % on every link drops 25 % per link and direction; 30 % on one device drops 30 % each way on its links', { timeout: 120_000 }, async (t) => {
  const owned = new Owned()
  t.teardown(() => owned.teardown())
  const net = await Net.create(owned, 3)
  if (!net.faultsAvailable) {
    t.comment(`left out: ${net.why}`)
    t.is(net.mode, 'loopback', 'no namespaces here: the nemesis runs on loopback without network faults, as it says')
    return
  }
  t.is(await delivered(net, 0, 1), SENT, 'no loss before a fault')

  await net.lossEverywhere(25)
  for (const [a, b] of [[0, 1], [1, 0], [2, 1]] as const) {
    const got = await delivered(net, a, b)
    const lost = 100 * (1 - got / SENT)
    t.ok(Math.abs(lost - 25) <= 4, `every link at 25 %: ${a} -> ${b} lost ${lost.toFixed(1)} %`)
  }

  await net.heal()
  t.is(await delivered(net, 1, 0), SENT, 'healed: no loss')

  await net.loss(0, 30)
  for (const [a, b] of [[0, 1], [1, 0]] as const) {
    const lost = 100 * (1 - (await delivered(net, a, b)) / SENT)
    t.ok(Math.abs(lost - 30) <= 4, `device 0 at 30 %: ${a} -> ${b} lost ${lost.toFixed(1)} %`)
  }
  t.is(await delivered(net, 1, 2), SENT, 'a link without device 0 loses nothing')
  await net.heal()
})
