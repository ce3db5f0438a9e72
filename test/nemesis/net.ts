/**
 * The nemesis's network: one network namespace per node (each device and
 * the malformed-op writer), a veth pair from each to a bridge in the host
 * namespace, and nftables rules inside each node's namespace for the
 * faults. The host side of the bridge (`hostIp`) carries the local DHT
 * bootstrap, the fake forge and the webhook proxy; the rules never match it,
 * so a cut-off device still reaches the forge (the dangerous case: a stale
 * holder that can still mutate) and still takes webhooks.
 *
 * Faults (all in the node's own namespace, table `inet nemesis`, rewritten
 * whole and atomically by one `nft -f`):
 * - cut: packets from / to the given peers' addresses dropped (both ways,
 *   or one way: only what the node receives, or only what it sends);
 * - loss: `numgen random mod 100 < N drop` on what a node sends to its
 *   peers and what it receives from them; loss on every link drops only
 *   what each node sends (a packet crosses two namespaces' rules, so
 *   dropping at both ends would make N % per link 1 - (1 - N)^2: 44 % for
 *   25);
 * - heal: the table emptied.
 * This kernel has no traffic control (tc/netem refuse), so there is no
 * delay or jitter here; the forge's slow answers are made at the forge.
 *
 * Without root (or without `ip` and `nft`, or where a namespace or an nftables
 * table cannot be made: a container without CAP_NET_ADMIN) every node runs on 127.0.0.1 in
 * the host namespace and the network faults are left out; `why` says so.
 *
 * Cleanup: namespaces, veths and the bridge carry this process's pid in
 * their names; teardown deletes them (a namespace takes its rules and its
 * veth end with it), and a later run deletes what a run killed with SIGKILL
 * left behind (names whose pid is no longer alive). Commands run
 * asynchronously during a run (a synchronous spawn would stall the
 * harness's reading of role lines) and synchronously at teardown.
 */
import { spawn, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import type { Owned } from './owned.js'

export type CutDirection = 'both' | 'in' | 'out'

interface NodeRules {
  /** Drop what this node receives from these addresses. */
  dropIn: Set<string>
  /** Drop what this node sends to these addresses. */
  dropOut: Set<string>
  /** Percent of packets from peers dropped at random. */
  lossInPct: number
  /** Percent of packets to peers dropped at random. */
  lossOutPct: number
}

const TABLE = 'nemesis'

export class Net {
  private readonly rules: NodeRules[]

  private constructor(
    /** 'netns': namespaces and nftables; 'loopback': every node on 127.0.0.1, no network faults. */
    readonly mode: 'netns' | 'loopback',
    /** Why network faults are left out (loopback mode). */
    readonly why: string | null,
    /** The address of the bridge in the host namespace (DHT, forge, proxy), or 127.0.0.1. */
    readonly hostIp: string,
    private readonly ips: string[],
    private readonly namespaces: string[]
  ) {
    this.rules = ips.map(() => ({ dropIn: new Set(), dropOut: new Set(), lossInPct: 0, lossOutPct: 0 }))
  }

  /** Namespaces for `nodes` nodes when this process may make them, else loopback (with the reason). */
  static async create(owned: Owned, nodes: number, forceLoopback: string | null = null): Promise<Net> {
    const why = forceLoopback ?? probe()
    if (why !== null) return new Net('loopback', why, '127.0.0.1', Array.from({ length: nodes }, () => '127.0.0.1'), [])
    cleanupStale()
    const rid = process.pid.toString(36)
    const subnet = freeSubnet()
    const bridge = `aln${rid}br`
    const hostIp = `${subnet}.1`
    const ips = Array.from({ length: nodes }, (_, i) => `${subnet}.${10 + i}`)
    const namespaces = ips.map((_, i) => `aln-${rid}-n${i}`)
    // Registered before the first command: a failure halfway still removes what was made.
    owned.onTeardown(() => {
      for (const ns of namespaces) spawnSync('ip', ['netns', 'del', ns], { stdio: 'ignore' })
      for (let i = 0; i < nodes; i++) spawnSync('ip', ['link', 'del', `aln${rid}h${i}`], { stdio: 'ignore' })
      spawnSync('ip', ['link', 'del', bridge], { stdio: 'ignore' })
    })
    await run('ip', ['link', 'add', bridge, 'type', 'bridge'])
    await run('ip', ['addr', 'add', `${hostIp}/24`, 'dev', bridge])
    await run('ip', ['link', 'set', bridge, 'up'])
    for (let i = 0; i < nodes; i++) {
      const ns = namespaces[i]!
      const host = `aln${rid}h${i}`
      const inner = `aln${rid}n${i}`
      await run('ip', ['netns', 'add', ns])
      await run('ip', ['link', 'add', host, 'type', 'veth', 'peer', 'name', inner])
      await run('ip', ['link', 'set', inner, 'netns', ns])
      await run('ip', ['link', 'set', host, 'master', bridge, 'up'])
      await run('ip', ['-n', ns, 'addr', 'add', `${ips[i]}/24`, 'dev', inner])
      await run('ip', ['-n', ns, 'link', 'set', inner, 'up'])
      await run('ip', ['-n', ns, 'link', 'set', 'lo', 'up'])
    }
    const net = new Net('netns', null, hostIp, ips, namespaces)
    for (let i = 0; i < nodes; i++) await net.apply(i)
    return net
  }

  get faultsAvailable(): boolean {
    return this.mode === 'netns'
  }

  ipOf(node: number): string {
    return this.ips[node]!
  }

  /** argv run inside the node's namespace (as is in loopback mode): `ip netns exec` execs in place, so the pid is the command's. */
  wrap(node: number, argv: string[]): string[] {
    return this.mode === 'netns' ? ['ip', 'netns', 'exec', this.namespaces[node]!, ...argv] : argv
  }

  /** Drop traffic between the nodes of `side` and every node in `others`: both ways, or only into / out of `side`. */
  async cut(side: number[], others: number[], direction: CutDirection): Promise<void> {
    this.needFaults()
    for (const a of side) {
      for (const b of others) {
        if (direction === 'both' || direction === 'in') this.rules[a]!.dropIn.add(this.ips[b]!)
        if (direction === 'both' || direction === 'out') this.rules[a]!.dropOut.add(this.ips[b]!)
      }
    }
    // The other side's rules too for a cut both ways (a packet already sent is dropped at either end).
    if (direction === 'both') {
      for (const b of others) {
        for (const a of side) {
          this.rules[b]!.dropIn.add(this.ips[a]!)
          this.rules[b]!.dropOut.add(this.ips[a]!)
        }
      }
    }
    await Promise.all([...new Set([...side, ...(direction === 'both' ? others : [])])].map((n) => this.apply(n)))
  }

  /** Random loss of `pct` % on every packet between `node` and its peers, each way. */
  async loss(node: number, pct: number): Promise<void> {
    this.needFaults()
    const r = this.rules[node]!
    r.lossInPct = r.lossOutPct = percent(pct)
    await this.apply(node)
  }

  /** Random loss of `pct` % on every link between two nodes, each way: dropped where it is sent only. */
  async lossEverywhere(pct: number): Promise<void> {
    this.needFaults()
    for (const r of this.rules) {
      r.lossInPct = 0
      r.lossOutPct = percent(pct)
    }
    await Promise.all(this.rules.map((_, n) => this.apply(n)))
  }

  /** Every rule removed. */
  async heal(): Promise<void> {
    if (this.mode !== 'netns') return
    const dirty: number[] = []
    this.rules.forEach((r, i) => {
      if (r.dropIn.size > 0 || r.dropOut.size > 0 || r.lossInPct > 0 || r.lossOutPct > 0) dirty.push(i)
      r.dropIn.clear()
      r.dropOut.clear()
      r.lossInPct = r.lossOutPct = 0
    })
    await Promise.all(dirty.map((n) => this.apply(n)))
  }

  /** Whether any rule is in place (for the final heal's check). */
  get faulty(): boolean {
    return this.rules.some((r) => r.dropIn.size > 0 || r.dropOut.size > 0 || r.lossInPct > 0 || r.lossOutPct > 0)
  }

  /** The live ruleset of every namespace (for the end-of-run check that nothing is left). */
  async rulesets(): Promise<string[]> {
    if (this.mode !== 'netns') return []
    return Promise.all(this.namespaces.map((ns) => output('ip', ['netns', 'exec', ns, 'nft', 'list', 'table', 'inet', TABLE])))
  }

  private needFaults(): void {
    if (this.mode !== 'netns') throw new Error(`network faults are not available: ${this.why ?? 'loopback'}`)
  }

  private async apply(node: number): Promise<void> {
    if (this.mode !== 'netns') return
    const r = this.rules[node]!
    const peers = this.ips.filter((_, i) => i !== node)
    const set = (ips: Iterable<string>): string => `{ ${[...ips].join(', ')} }`
    const input: string[] = []
    const out: string[] = []
    if (r.dropIn.size > 0) input.push(`ip saddr ${set(r.dropIn)} drop`)
    if (r.dropOut.size > 0) out.push(`ip daddr ${set(r.dropOut)} drop`)
    if (r.lossInPct > 0 && peers.length > 0) input.push(`ip saddr ${set(peers)} numgen random mod 100 < ${r.lossInPct} drop`)
    if (r.lossOutPct > 0 && peers.length > 0) out.push(`ip daddr ${set(peers)} numgen random mod 100 < ${r.lossOutPct} drop`)
    const chain = (name: string, hook: string, lines: string[]): string =>
      `  chain ${name} {\n    type filter hook ${hook} priority 0; policy accept;\n${lines.map((l) => `    ${l}\n`).join('')}  }\n`
    const text = `table inet ${TABLE} {}\nflush table inet ${TABLE}\ntable inet ${TABLE} {\n${chain('input', 'input', input)}${chain('output', 'output', out)}}\n`
    await run('ip', ['netns', 'exec', this.namespaces[node]!, 'nft', '-f', '-'], text)
  }
}

function percent(pct: number): number {
  if (!(pct >= 0 && pct <= 100)) throw new Error(`loss: ${pct} is not a percentage`)
  return Math.round(pct)
}

/** null when namespaces and nftables can be used here, else why not. */
function probe(): string | null {
  if (process.platform !== 'linux') return 'not Linux'
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'not root (network namespaces and nftables need it)'
  for (const bin of ['ip', 'nft']) {
    const found = ['/usr/sbin', '/sbin', '/usr/bin', '/bin'].some((d) => existsSync(`${d}/${bin}`))
    if (!found) return `no \`${bin}\` command (apt-get install -y ${bin === 'nft' ? 'nftables' : 'iproute2'})`
  }
  // Root is not enough in a container without CAP_NET_ADMIN, or on a kernel without nf_tables: try both once.
  const ns = `aln-${process.pid.toString(36)}-probe`
  const add = spawnSync('ip', ['netns', 'add', ns], { encoding: 'utf8' })
  if (add.status !== 0) return `cannot make a network namespace (ip netns add: ${(add.stderr ?? '').trim() || `exit ${add.status}`})`
  try {
    const nft = spawnSync('ip', ['netns', 'exec', ns, 'nft', '-f', '-'], { encoding: 'utf8', input: `table inet ${TABLE} {}\n` })
    if (nft.status !== 0) return `nftables does not work here (nft: ${(nft.stderr ?? '').trim() || `exit ${nft.status}`})`
  } finally {
    spawnSync('ip', ['netns', 'del', ns], { stdio: 'ignore' })
  }
  return null
}

/** A 10.213.X.0/24 no interface of this host uses. */
function freeSubnet(): string {
  const used = spawnSync('ip', ['-4', '-o', 'addr'], { encoding: 'utf8' }).stdout ?? ''
  for (let k = 0; k < 200; k++) {
    const x = 20 + ((process.pid + k) % 200)
    if (!used.includes(`10.213.${x}.`)) return `10.213.${x}`
  }
  throw new Error('no free 10.213.X.0/24 subnet')
}

/** Namespaces and links left by a nemesis run that died without its teardown (its pid is gone). */
function cleanupStale(): void {
  const alive = (rid: string): boolean => {
    try {
      process.kill(parseInt(rid, 36), 0)
      return true
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EPERM'
    }
  }
  const nsList = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout ?? ''
  for (const line of nsList.split('\n')) {
    const m = /^aln-([0-9a-z]+)-(?:n[0-9]+|probe)/.exec(line)
    if (m !== null && !alive(m[1]!)) spawnSync('ip', ['netns', 'del', line.split(' ')[0]!], { stdio: 'ignore' })
  }
  const links = spawnSync('ip', ['-o', 'link'], { encoding: 'utf8' }).stdout ?? ''
  for (const line of links.split('\n')) {
    const m = /^\d+: (aln([0-9a-z]+)(?:br|h[0-9]+))[@:]/.exec(line)
    if (m !== null && !alive(m[2]!)) spawnSync('ip', ['link', 'del', m[1]!], { stdio: 'ignore' })
  }
}

function run(cmd: string, args: string[], input?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: [input === undefined ? 'ignore' : 'pipe', 'ignore', 'pipe'] })
    let err = ''
    p.stderr!.on('data', (d: Buffer) => (err += d.toString()))
    p.on('error', reject)
    p.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(' ')}: exit ${code}: ${err.trim()}`))))
    if (input !== undefined) p.stdin!.end(input)
  })
}

function output(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'ignore'] })
    let out = ''
    p.stdout!.on('data', (d: Buffer) => (out += d.toString()))
    p.on('error', () => resolve(''))
    p.on('close', () => resolve(out))
  })
}
