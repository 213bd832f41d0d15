import struct, random, json, math
def f32(x): return struct.unpack('<f', struct.pack('<f', x))[0]
def f16b(x): return struct.unpack('<H', struct.pack('<e', x))[0]  # RNE
def inv(d): return f32(1.0/d) if d != 0 else 0.0
def trunc_i(v): return int(math.trunc(v))
def round_away(v): return int(math.floor(abs(v)+0.5))*(1 if v>=0 else -1) if v!=0 else 0
def signed_absmax(x):
    amax=0.0; mx=0.0
    for v in x:
        if amax < abs(v): amax=abs(v); mx=v
    return mx
def q8_0(x):
    amax=max(abs(v) for v in x); d=f32(amax/127.0); id_=inv(d)
    b=struct.pack('<H', f16b(d))
    for v in x:
        r=f32(v*id_); q=round_away(r)
        b+=struct.pack('<b', q)
    return b
def q4_0(x):
    d=f32(signed_absmax(x)/-8.0); id_=inv(d)
    b=struct.pack('<H', f16b(d))
    for j in range(16):
        q0=min(trunc_i(f32(f32(x[j]*id_)+8.5)),15); q1=min(trunc_i(f32(f32(x[j+16]*id_)+8.5)),15)
        b+=bytes([q0|(q1<<4)])
    return b
def q5_0(x):
    d=f32(signed_absmax(x)/-16.0); id_=inv(d)
    qs=b''; qh=0
    for j in range(16):
        q0=min(trunc_i(f32(f32(x[j]*id_)+16.5)),31); q1=min(trunc_i(f32(f32(x[j+16]*id_)+16.5)),31)
        qs+=bytes([(q0&15)|((q1&15)<<4)]); qh|=((q0&16)>>4)<<j; qh|=((q1&16)>>4)<<(j+16)
    return struct.pack('<H', f16b(d))+struct.pack('<I',qh)+qs
def mm(x): return min(x), max(x)
def q4_1(x):
    mn,mx=mm(x); d=f32(f32(mx-mn)/15.0); id_=inv(d)
    b=struct.pack('<HH', f16b(d), f16b(mn))
    for j in range(16):
        q0=min(trunc_i(f32(f32(f32(x[j]-mn)*id_)+0.5)),15); q1=min(trunc_i(f32(f32(f32(x[j+16]-mn)*id_)+0.5)),15)
        b+=bytes([q0|(q1<<4)])
    return b
def q5_1(x):
    mn,mx=mm(x); d=f32(f32(mx-mn)/31.0); id_=inv(d)
    qs=b''; qh=0
    for j in range(16):
        q0=trunc_i(f32(f32(f32(x[j]-mn)*id_)+0.5)); q1=trunc_i(f32(f32(f32(x[j+16]-mn)*id_)+0.5))
        qs+=bytes([(q0&15)|((q1&15)<<4)]); qh|=((q0&16)>>4)<<j; qh|=((q1&16)>>4)<<(j+16)
    return struct.pack('<HH', f16b(d), f16b(mn))+struct.pack('<I',qh)+qs
Q={'q8_0':(q8_0,34),'q4_0':(q4_0,18),'q5_0':(q5_0,22),'q4_1':(q4_1,20),'q5_1':(q5_1,24)}
random.seed(7)
cases=[]
def case(name, qt, ne, transposed=False):
    n=ne[0]*ne[1]
    vals=[f32(random.uniform(-1,1)) for _ in range(n)]  # logical order
    if transposed:
        # storage [ne0, ne2, ne1] contiguous; view ne [ne0, ne1, ne2] (dims 1, 2 swapped)
        n=ne[0]*ne[1]*ne[2]
        vals=[f32(random.uniform(-1,1)) for _ in range(n)]
        store=[0.0]*n
        for i2 in range(ne[2]):
            for i1 in range(ne[1]):
                for i0 in range(ne[0]):
                    store[(i1*ne[2]+i2)*ne[0]+i0]=vals[(i2*ne[1]+i1)*ne[0]+i0]
        nb=[4,4*ne[0]*ne[2],4*ne[0],4*n]
    else:
        store=vals; nb=None
    open(f'./{name}_x.bin','wb').write(struct.pack(f'<{n}f',*store))
    f,bs=Q[qt]
    out=b''.join(f(vals[i:i+32]) for i in range(0,n,32))
    open(f'./{name}_y.bin','wb').write(out)
    open(f'./{name}_b.bin','wb').write(bytes(len(out)))
    x={'dtype':'f32','ne':ne,'file':f'{name}_x.bin'}
    if nb: x['nb']=nb
    cases.append({'name':name,'op':'CPY','inputs':[x,{'dtype':qt,'ne':ne,'file':f'{name}_b.bin'}],
                  'output':{'dtype':qt,'ne':ne,'file':f'{name}_y.bin'},'nmse_max':1e-7})
for qt in Q:
    case(f'cpy_{qt}_odd3', qt, [32,3])
    case(f'cpy_{qt}_odd5', qt, [32,5])
    case(f'cpy_{qt}_1', qt, [32,1])
    case(f'cpy_{qt}_permuted', qt, [64,3,5], True)
json.dump({'cases':cases}, open('./manifest.json','w'), indent=1)
