import { Transform, type TransformCallback } from 'node:stream'

/**
 * One direction of an in-process replication link: passes chunks through,
 * or holds them (in order) while `held`, as a frozen peer's open connection
 * would: nothing dropped, nothing delivered, until release().
 */
export class Gate extends Transform {
  held = false
  private readonly queue: Buffer[] = []

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    if (this.held) this.queue.push(chunk)
    else this.push(chunk)
    cb()
  }

  release(): void {
    this.held = false
    for (const c of this.queue.splice(0)) this.push(c)
  }
}
