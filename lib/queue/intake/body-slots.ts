/**
 * The webhook intake's body slots: how many request bodies are read at once.
 *
 * Invariant: at most `size` bodies are held in memory, whatever clients
 * send; a request beyond that waits unread (TCP backpressure). A freed
 * slot goes first to a waiter whose body has all arrived, so clients that
 * trickle their bodies cannot keep a genuine delivery (sent at once)
 * waiting behind them.
 */
import type { IncomingMessage } from 'node:http'

/**
 * A counting semaphore over requests: at most N hold a slot (the
 * intake's bodies being read). A freed slot
 * goes to the first waiter whose body has all arrived (parsed into its
 * request's buffer: Node reads a waiting request's bytes up to the stream's
 * high-water mark, so a delivery's body sent at once is complete there),
 * else to the first waiter. A waiter whose request closes first gets null
 * and leaves the queue.
 */
export class BodySlots {
  private free: number
  private readonly waiting = new Map<() => void, IncomingMessage>()

  constructor(size: number) {
    if (!Number.isSafeInteger(size) || size < 1) throw new RangeError(`maxConcurrentBodies must be a positive integer, got ${size}`)
    this.free = size
  }

  acquire(req: IncomingMessage): Promise<(() => void) | null> {
    if (req.destroyed) return Promise.resolve(null)
    if (this.free > 0) {
      this.free--
      return Promise.resolve(this.releaser())
    }
    return new Promise((resolve) => {
      const grant = (): void => {
        req.off('close', onclose)
        resolve(this.releaser())
      }
      const onclose = (): void => {
        this.waiting.delete(grant)
        resolve(null)
      }
      this.waiting.set(grant, req)
      req.once('close', onclose)
    })
  }

  private releaser(): () => void {
    let released = false
    return () => {
      if (released) return
      released = true
      let next: (() => void) | null = null
      for (const [grant, req] of this.waiting) {
        if (req.complete) {
          next = grant
          break
        }
        next ??= grant
      }
      if (next === null) {
        this.free++
        return
      }
      this.waiting.delete(next)
      next()
    }
  }
}
