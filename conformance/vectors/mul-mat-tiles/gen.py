import struct, random, json, os
random.seed(7)
import os
D=os.path.dirname(os.path.abspath(__file__))
cases=[]
def wr(name, fmt, vals):
    with open(os.path.join(D,name),'wb') as f:
        f.write(struct.pack('<%d%s'%(len(vals),fmt), *vals))
def f16r(v): return struct.unpack('<e', struct.pack('<e', v))[0]
def q8_0(row):
    out=b''; deq=[]
    for b in range(0,len(row),32):
        blk=row[b:b+32]; amax=max(abs(x) for x in blk); d=amax/127.0
        dh=f16r(d); idd=1.0/d if d else 0.0
        qs=[int(round(x*idd)) for x in blk]
        out+=struct.pack('<e',d)+struct.pack('<32b',*qs)
        deq+=[q*dh for q in qs]
    return out,deq
def case(name, wt, K, M, a23, N, b23, xt='f32', x_pad=0):
    ne02,ne03=a23; ne12,ne13=b23
    W=[[[[random.uniform(-1,1) for k in range(K)] for m in range(M)] for i2 in range(ne02)] for i3 in range(ne03)]
    # weights file + dequantized values
    if wt=='q8_0':
        data=b''; Wd=[]
        for i3 in range(ne03):
            l2=[]
            for i2 in range(ne02):
                l1=[]
                for m in range(M):
                    bts,deq=q8_0(W[i3][i2][m]); data+=bts; l1.append(deq)
                l2.append(l1)
            Wd.append(l2)
        open(os.path.join(D,name+'_a.bin'),'wb').write(data)
    else:
        fmt='e' if wt=='f16' else 'f'
        flat=[W[i3][i2][m][k] for i3 in range(ne03) for i2 in range(ne02) for m in range(M) for k in range(K)]
        wr(name+'_a.bin',fmt,flat)
        Wd=[[[[f16r(v) if wt=='f16' else struct.unpack('<f',struct.pack('<f',v))[0] for v in r] for r in l1] for l1 in l2] for l2 in W]
    rowlen=K+x_pad
    X=[[[[random.uniform(-1,1) for k in range(K)] for n in range(N)] for i2 in range(ne12)] for i3 in range(ne13)]
    if xt=='f16': X=[[[[f16r(v) for v in r] for r in l1] for l1 in l2] for l2 in X]
    xflat=[]
    for i3 in range(ne13):
        for i2 in range(ne12):
            for n in range(N):
                xflat+=X[i3][i2][n]+[0.0]*x_pad
    wr(name+'_b.bin','e' if xt=='f16' else 'f',xflat)
    r2=ne12//ne02; r3=ne13//ne03
    out=[]
    for i3 in range(ne13):
        for i2 in range(ne12):
            for n in range(N):
                xr=X[i3][i2][n]
                for m in range(M):
                    wrow=Wd[i3//r3][i2//r2][m]
                    out.append(sum(a*b for a,b in zip(wrow,xr)))
    wr(name+'_out.bin','f',out)
    es=2 if xt=='f16' else 4
    b={'dtype':xt,'ne':[K,N,ne12,ne13],'file':name+'_b.bin'}
    if x_pad: b['nb']=[es,rowlen*es,rowlen*es*N,rowlen*es*N*ne12]
    cases.append({'name':name,'op':'MUL_MAT','inputs':[{'dtype':wt,'ne':[K,M,ne02,ne03],'file':name+'_a.bin'},b],
                  'output':{'dtype':'f32','ne':[M,N,ne12,ne13],'file':name+'_out.bin'},'nmse_max':5e-4})
case('f16_multi_tile_bcast2', 'f16', 80, 144, (1,1), 150, (2,1))
case('f16_strided_x', 'f16', 64, 130, (1,1), 140, (1,1), xt='f16', x_pad=8)
case('q8_0_bcast3', 'q8_0', 96, 144, (1,1), 130, (1,2))
case('f32_tiled_multi', 'f32', 70, 200, (2,1), 130, (2,1))
case('f16_big_k', 'f16', 1000, 130, (1,1), 136, (1,1))
json.dump({'cases':cases}, open(os.path.join(D,'manifest.json'),'w'), indent=1)
print('ok')
