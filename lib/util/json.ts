/**
 * The JSON values the control socket and the console exchange: what a
 * handler answers and the parameters it takes (no undefined inside a value,
 * so an answer always survives JSON.stringify unchanged).
 */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
export type Params = Record<string, Json | undefined>
