declare module 'rache' {
  /** The random-eviction cache hyperbee keeps decoded nodes in; one given to corestore as `globalCache` bounds every bee's. */
  export default class Rache {
    constructor(opts?: { maxSize?: number })
    readonly maxSize: number
    /** Entries held, over every sub-cache sharing this one. */
    readonly globalSize: number
  }
}
